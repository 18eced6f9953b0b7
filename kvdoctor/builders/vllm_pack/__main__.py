"""`python -m kvdoctor.builders.vllm_pack ...`: build (or --check) the vLLM knowledge pack."""
from __future__ import annotations

import sys

from kvdoctor.builders.vllm_pack.build import main

sys.exit(main())
