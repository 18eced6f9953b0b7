"""`python -m kvdoctor.builders.api_history ...`: build kvdoctor/data/api_history.json.gz."""
from __future__ import annotations

from kvdoctor.builders.api_history.build import main

main()
