"""`python -m kvdoctor.builders.message_index ...`: build kvdoctor/data/message_index/index.json.gz."""
from __future__ import annotations

from kvdoctor.builders.message_index.build import main

main()
