"""`python -m kvdoctor.builders.architectures ...`: build kvdoctor/data/vllm_pack/architectures.json."""
from __future__ import annotations

import sys

from kvdoctor.builders.architectures.build import main

sys.exit(main())
