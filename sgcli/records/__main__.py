"""python -m sgcli.records README.md docs/json-outputs.md: regenerate their field lists."""

import sys
from pathlib import Path

from sgcli.records import with_field_lists

for arg in sys.argv[1:]:
    Path(arg).write_text(with_field_lists(Path(arg).read_text(encoding="utf-8")), encoding="utf-8")
