"""`sgcli lint`: ruff-like diagnostics for grammars, regexes and JSON Schemas.

See docs/lint.md for the rules and output formats. Entry points: `Linter` (one file at
a time, with `LintOptions`), `RULES` (the registry), `Selection` (--select/--ignore),
`RENDERERS` (output formats).
"""

from sgcli.lint.diagnostic import Diagnostic
from sgcli.lint.render import FORMATS, RENDERERS
from sgcli.lint.rules import RULES
from sgcli.lint.runner import Linter, LintOptions
from sgcli.lint.select import Selection

__all__ = ["Diagnostic", "FORMATS", "RENDERERS", "RULES", "Linter", "LintOptions", "Selection"]
