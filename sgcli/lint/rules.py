"""Every lint rule sgcli knows: code, name, severity, what it needs, and why it matters.

Codes are a family letter plus three digits, as in ruff:

- S: syntax and compile: what the backends themselves say (errors, warnings) and what
  sgcli's own readers cannot read
- G: grammar structure, found by sgcli's own reader (no backend, no tokenizer)
- W: whitespace that can repeat without bound
- J: JSON Schema keywords a backend ignores or refuses, verified against its matcher
- R: regex features no token automaton can express
- T: interactions with the tokenizer (`--tokenizer`)
- L: length limits (`--max-tokens`)

`needs` says what a rule must have to run: "structure" (only the file), "backend"
(compiles with each chosen backend; without `--tokenizer` they compile against a
256-byte vocabulary), "tokenizer" (an explicit `--tokenizer`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sgcli import RECORD_SCHEMA_VERSION

ERROR = "error"
WARNING = "warning"

FAMILIES = {
    "S": "syntax and compile errors and warnings",
    "G": "grammar structure",
    "W": "unbounded whitespace",
    "J": "JSON Schema enforcement",
    "R": "regex features",
    "T": "tokenizer",
    "L": "length",
}


@dataclass(frozen=True)
class LintRule:
    code: str
    name: str
    severity: str
    needs: str  # "structure" | "backend" | "tokenizer"
    summary: str
    explanation: str
    example: str = ""
    fix: str = ""

    @property
    def family(self) -> str:
        return FAMILIES[self.code[0]]

    def as_dict(self) -> dict:
        """As `sgcli rule --json` prints it: the fields, with the family's name after the severity."""
        row = asdict(self)
        head = {"schema_version": RECORD_SCHEMA_VERSION, **{k: row.pop(k) for k in ("code", "name", "severity")}}
        return {**head, "family": self.family, **row}  # sgcli/records/ Rule


_ALL = [
    LintRule(
        "S001",
        "compile-error",
        ERROR,
        "backend",
        "A backend rejects the file; reported where the backend says, one diagnostic per backend.",
        "Each backend has its own dialect: xgrammar has no Unicode property classes (`\\p{L}`), llguidance "
        "refuses lookaround in regexes, outlines-core has no grammars at all. A file only one backend "
        "accepts pins you to that backend in production. (Where a spelling fixes it, sgcli respells for the "
        'backend instead: xgrammar gets `""` for an empty GBNF alternative.)',
        "word ::= [z-a]+        # a backwards range: every backend rejects it",
        "word ::= [a-z]+",
    ),
    LintRule(
        "S002",
        "backend-warning",
        WARNING,
        "backend",
        "A backend weakened or ignored part of the constraint while compiling (its own warning).",
        "Grammar libraries log these from native code to stderr, where they scroll past unseen: xgrammar "
        "treats `oneOf` as `anyOf`, drops `minLength`/`maxLength` beside `pattern`, ignores anchors in the "
        "middle of a regex. sgcli captures them and places each at the schema location it is about "
        "(its JSON pointer).",
        '{"oneOf": [{"type": "integer"}, {"type": "number"}]}',
        "make the branches disjoint, or accept anyOf semantics",
    ),
    LintRule(
        "S003",
        "invalid-json-schema",
        ERROR,
        "structure",
        "The schema file is not valid JSON, not a valid JSON Schema (meta-schema validation), or a schema "
        "that admits no value at all (`enum: []`, `minLength` over `maxLength`, a date under `maxLength: 5`); "
        "or a schema written inside a Lark grammar (`%json {...}`) or a structural tag is not valid JSON Schema.",
        "Backends disagree about malformed schemas: some refuse them, some compile whatever they "
        "understand. sgcli checks the file itself first and points at the offending value; `generate` "
        "refuses the same schemas (exit 2) before any model loads.",
        '{"type": "integer", "minimum": "5"}',
        '{"type": "integer", "minimum": 5}',
    ),
    LintRule(
        "S004",
        "unreadable-structure",
        WARNING,
        "structure",
        "sgcli's own reader cannot parse the file, so the G, W and R rules did not run on it.",
        "Reported only when no backend rejected the file (otherwise S001 already says what is wrong). "
        "It means the file uses syntax sgcli does not know; the backends' own checks still ran.",
        "",
        "report the construct to sgcli, or --ignore S004",
    ),
    LintRule(
        "G001",
        "undefined-rule",
        ERROR,
        "structure",
        "A rule refers to a name no rule defines.",
        "Backends reject the whole grammar at the first undefined name; sgcli lists every one.",
        'root ::= greeting " " name\ngreeting ::= "hi"',
        "define `name`, or fix the spelling",
    ),
    LintRule(
        "G002",
        "unused-rule",
        WARNING,
        "structure",
        "A rule cannot be reached from the root rule (`root` in GBNF, `start` in Lark).",
        "An unreachable rule is dead code, and often a sign that a reference to it was misspelled or "
        "forgotten. `%ignore` counts as a use in Lark.",
        'root ::= "a"\nunused ::= "b"',
        "remove it, or refer to it",
    ),
    LintRule(
        "G003",
        "duplicate-rule",
        ERROR,
        "structure",
        "A name is defined more than once.",
        "xgrammar and Lark reject a second definition; an engine that accepts it keeps only one of the "
        "bodies. Either way one of them is not what you meant.",
        'b ::= "x"\nb ::= "y"',
        'merge them: b ::= "x" | "y"',
    ),
    LintRule(
        "G004",
        "left-recursion",
        WARNING,
        "structure",
        "A GBNF rule can reach itself without consuming input first (left recursion).",
        "llama.cpp's GBNF engine rejects left-recursive grammars, so a GBNF file that uses it only works "
        "with Earley-based backends (xgrammar, llguidance). Applies to GBNF/EBNF only: in Lark, left "
        "recursion is idiomatic and llguidance prefers it.",
        'expr ::= expr "+" term | term',
        'expr ::= term ("+" term)*',
    ),
    LintRule(
        "G005",
        "nullable-root",
        WARNING,
        "structure",
        "The root rule accepts the empty string.",
        "A model may then stop at once and return nothing, and every backend will call that valid.",
        "root ::= item*",
        "root ::= item+",
    ),
    LintRule(
        "G006",
        "nested-unbounded-repetition",
        WARNING,
        "structure",
        "An unbounded repetition whose body is itself an unbounded repetition, as in `(x+)*`.",
        "The same text splits into iterations in exponentially many ways: regex engines backtrack "
        "catastrophically, and Earley parsers carry every split. Followed through rule references "
        "(in Lark, into terminals from a parser rule only where a backend judged has no lexer, xgrammar: "
        "llguidance's lexer matches a terminal as a whole).",
        "root ::= ([a-z]+)*",
        "root ::= [a-z]*",
    ),
    LintRule(
        "G007",
        "missing-root",
        ERROR,
        "structure",
        "The grammar has no root rule (`root` in GBNF, `start` in Lark).",
        "Backends start matching from the root rule; without it nothing can be generated.",
        'main ::= "a"',
        'root ::= "a"',
    ),
    LintRule(
        "G009",
        "continued-rule",
        WARNING,
        "structure",
        "A GBNF rule's body goes on past a newline outside parentheses.",
        "llama.cpp's GBNF parser ends a rule at a newline that is not inside ( ... ) or right after `::=` "
        "or `|`, and then refuses the grammar (`expecting name`); xgrammar, llguidance and sgcli read the "
        "next line as more of the rule. A grammar meant for llama.cpp (or for servers that use its parser) "
        "should keep each top-level sequence on one line.",
        'root ::= "a"\n  "b"',
        'root ::= "a" "b"   (or: root ::= ( "a"\n  "b" ))',
    ),
    LintRule(
        "G008",
        "unbounded-free-text",
        WARNING,
        "structure",
        "Free text without a bound (`/.+/`, `/[^\\n]+/`, `.*`) with required grammar after it.",
        "Only the model decides when free text ends. A small model often never writes the delimiter, so "
        "the run ends at --max-tokens and the required rest (the answer, the JSON) is never written. With "
        "a bound the backend forces the rest once it is reached: llguidance's (and xgrammar's) Lark rule "
        "attribute `name[max_tokens=N]: ...` counts tokens; a bounded repetition counts characters. Free "
        "text at the very end is not flagged: the model may stop there.",
        'start: "Reasoning: " /.+/ "\\nJSON: " @answer',
        'start: "Reasoning: " reason "\\nJSON: " @answer\nreason[max_tokens=64]: /[^\\n]+/',
    ),
    LintRule(
        "G010",
        "cut-token-budget",
        WARNING,
        "structure",
        "A Lark rule with a token budget `name[max_tokens=N]` that a cut can leave unfinished.",
        "llguidance and xgrammar end the rule after N tokens wherever its text stands, so `body[max_tokens=3]: "
        "/[a-z]{3,40}[0-9]/` can stop before the digit, and the output is a text the grammar rejects "
        "(`valid: false`). Only a repetition of one character set from at most one (`/[^\\n]+/`) survives "
        "every cut.",
        "start: body\nbody[max_tokens=3]: /[a-z]{3,40}[0-9]/",
        "start: body\nbody: /[a-z]{3,10}[0-9]/",
    ),
    LintRule(
        "G011",
        "rule-never-ends",
        ERROR,
        "structure",
        "A rule the root reaches that no finite text completes: every alternative recurses (no base case), "
        "or needs a character class that holds no character (`[^\\x00-\\U0010FFFF]`, surrogates only).",
        "Backends compile such a grammar and let the model into the rule, then never let it stop: the output "
        "runs to --max-tokens and is invalid, and xgrammar's search for forced text grew past 19 GB of memory "
        'on `root ::= "x" root`. Where it is the root, the grammar accepts no text at all. `generate` '
        "refuses it (exit 2) before the model loads.",
        'root ::= "x" root',
        'root ::= "x" root | "x"',
    ),
    LintRule(
        "G012",
        "greedy-lexeme",
        WARNING,
        "structure",
        "A Lark lexeme that can go on with the first character of a lexeme that may follow it (llguidance).",
        "llguidance lexes Lark greedily: it ends a terminal only where the next character cannot continue it. "
        'So in `start: NUMBER "."` the `.` after `1` is read as more of `NUMBER: /[0-9]+(\\.[0-9]+)?/`, '
        'and `1.` is refused; `"<a>" TEXT "</a>"` with `TEXT: /[^\\n]*/` accepts no text at all, so a '
        "generation runs to --max-tokens. xgrammar reads terminals as rules of characters and takes both. "
        "Judged only where a backend that lexes greedily reads the file.",
        'start: "<a>" TEXT "</a>"\nTEXT: /[^\\n]*/',
        'start: "<a>" text\ntext[stop="</a>"]: /[^\\n]*/',
    ),
    LintRule(
        "W001",
        "unbounded-whitespace",
        WARNING,
        "structure",
        "Whitespace can repeat without bound (`[ \\t\\n]*`, `\\s+`, `%ignore WS`).",
        "The classic runaway failure reported against vLLM and outlines: once a model starts emitting "
        "newlines or spaces where the grammar allows any number, it often never stops and the output "
        "is cut at the token limit. Bound the repetition.",
        "ws ::= [ \\t\\n]*",
        "ws ::= [ \\t\\n]{0,20}",
    ),
    LintRule(
        "W002",
        "unbounded-json-whitespace",
        WARNING,
        "backend",
        "A backend's JSON grammar lets whitespace between JSON tokens run without bound.",
        "Verified on each backend's matcher: a valid instance with 64 extra spaces after its first "
        "token is still accepted. Choose a bounded layout when generating.",
        "sgcli generate --schema s.json",
        "--max-whitespace 4, --json-whitespace compact or --indent 2",
    ),
    LintRule(
        "J001",
        "unenforced-keyword",
        ERROR,
        "backend",
        "A backend compiles the schema but silently ignores one of its keywords.",
        "For each keyword, sgcli builds an instance that is valid except for that one keyword (checked "
        "with the jsonschema library) and walks its tokens through the backend's matcher. If the matcher "
        "accepts it, the backend does not enforce the keyword and can generate output the schema forbids.",
        '{"type": "array", "uniqueItems": true}',
        "validate outputs after generation, or use a backend that enforces it",
    ),
    LintRule(
        "J002",
        "rejected-keyword",
        ERROR,
        "backend",
        "A backend refuses to compile the schema because of a keyword it does not implement.",
        "Reported at the keyword instead of as a generic compile error (S001).",
        '{"not": {"type": "string"}}',
        "drop the keyword or use a backend that supports it",
    ),
    LintRule(
        "J003",
        "unprobed-schema",
        WARNING,
        "backend",
        "The keyword probes behind J001 and W002 could not run on this schema, so no J001 is not a clean bill.",
        "J001 needs a valid instance of the schema to start from (built by sgcli, checked with the jsonschema "
        "library) that the backend's matcher accepts. When sgcli cannot build one (conflicting keywords, a "
        "pattern it cannot sample, deep recursion) or the matcher rejects it, the keywords were not checked. "
        "This used to be a note on stderr; it is a finding so that it shows up in --json and CI.",
        '{"type": "string", "format": "date", "pattern": "^x"}',
        "validate outputs after generation, or simplify the schema so an instance can be built",
    ),
    LintRule(
        "J004",
        "checker-enforced-keyword",
        WARNING,
        "backend",
        "The backend generate would choose leaves a keyword to sgcli's schema checker, which enforces it while "
        "decoding.",
        "Each backend declares which keywords its grammar enforces, and where (measured: "
        "benchmarks/keyword_positions.py). For the backend `generate` would use on this schema (the `--backend`, "
        "or the one `auto` would choose), every keyword it leaves unenforced is named at its JSON pointer; sgcli's "
        "schema checker validates the value holding it as soon as the value is complete and masks the tokens "
        "that would break it. Outputs stay valid, at some cost per token, and a model can write itself into a "
        "value no continuation repairs (the run then ends invalid, never valid).",
        '{"type": "array", "uniqueItems": true, "contains": {"const": 1}}',
        "use a backend whose grammar enforces it, or keep it: the checker enforces it",
    ),
    LintRule(
        "J005",
        "unenforceable-keyword",
        ERROR,
        "backend",
        "Nothing would enforce a keyword: neither the chosen backend's grammar nor sgcli's schema checker.",
        "The checker is jsonschema: a remote `$ref` it cannot resolve (sgcli fetches nothing), a `format` it has "
        "no checker for, a `pattern` Python's `re` cannot read, left unenforced by the grammar too, would reach "
        "generation unchecked. `generate`, `compile` and `compare-backends` refuse such a schema (exit 2) unless "
        "`--allow-unenforced`, and the record then lists each keyword under `unenforced`.",
        '{"type": "string", "format": "x-made-up"}',
        "rewrite or drop the keyword, choose a backend that enforces it, or pass --allow-unenforced knowingly",
    ),
    LintRule(
        "J006",
        "unbounded-string",
        WARNING,
        "structure",
        "A string in the schema has no length bound, or a bound that costs more tokens than the budget "
        "(`--max-tokens`, else generate's default of 256).",
        "Inside a JSON string the grammar allows any character, so only the model decides where the string "
        'ends. A small or base model often never closes it (`"john_john_john_...`): the run ends at '
        "--max-tokens with the object unfinished and the output invalid. With `maxLength`, an `enum`, a "
        "fully anchored `pattern` with bounded repetitions or a fixed-width `format` (date, time, "
        "date-time, uuid, ipv4, ipv6) the backend forces the closing quote once the bound is reached. A "
        "bounded string is costed at ~3 characters a token. Measured: xgrammar's grammar for a string with "
        '`maxLength` admits no escape sequence (no `\\"`, no `\\n`), so bound free prose with llguidance '
        "(the default), or keep such a string unbounded and rely on the repetition guard.",
        '{"type": "object", "properties": {"name": {"type": "string"}}}',
        '{"type": "object", "properties": {"name": {"type": "string", "maxLength": 60}}}',
    ),
    LintRule(
        "J007",
        "unknown-dialect",
        WARNING,
        "structure",
        "`$schema` is not the URI of a JSON Schema draft: a near miss of one (`https://` where the draft's "
        "URI says `http://`, or the other way), or a json-schema.org URI of no draft (the old "
        "`http://json-schema.org/schema#`). A vendor's own meta-schema (Snowplow's) is not reported: "
        "`compile` and `generate` note how they read it.",
        "Tools read such a schema differently. jsonschema, and with it most validators, knows only the exact "
        'URIs and reads anything else as the latest draft: a draft-04 schema\'s `"exclusiveMaximum": true` or '
        "list-form `items` then means something else. llguidance tries to fetch the URI and refuses the "
        "schema. sgcli reads a near miss as the draft it resembles and anything else as draft 2020-12, and "
        "gives llguidance that draft's own URI; other tools in your pipeline may not.",
        '{"$schema": "https://json-schema.org/draft-07/schema#", "type": "integer"}',
        '{"$schema": "http://json-schema.org/draft-07/schema#", "type": "integer"}',
    ),
    LintRule(
        "J008",
        "unbounded-array",
        WARNING,
        "structure",
        "An array in the schema has no `maxItems` (nor a closed `prefixItems`/`items: false` or "
        "`unevaluatedItems: false` tuple, an `enum` or a `const`), or a `maxItems` costing more tokens than the "
        "budget (at least a token an item and one a separator): the model alone decides how many items it writes "
        "within the budget (`--max-tokens`, else generate's default of 256).",
        "The grammar lets the model add item after item, and a small or base model often does until --max-tokens "
        "cuts the output, leaving it invalid. Measured 2026-12-06 with SmolLM2-135M-Instruct and default flags: "
        'an invoice\'s `items` array of objects without `maxItems` ran to 256 tokens (`"quantity":1`, 2, ... 10), '
        "finish length, invalid; with `maxItems: 5` the same run ended by itself, valid, in 158 tokens. With "
        "`maxItems` the backend forces the closing `]` once the bound is reached.",
        '{"type": "array", "items": {"type": "integer"}}',
        '{"type": "array", "items": {"type": "integer"}, "maxItems": 10}',
    ),
    LintRule(
        "R001",
        "regex-feature",
        ERROR,
        "structure",
        "A regex uses a feature a token automaton cannot express: lookahead, lookbehind, backreference, "
        "word boundary, or an anchor in the middle of the pattern.",
        "Constrained decoding compiles regexes to finite automata, which cannot look around or remember "
        "a captured group. Backends reject these features, or worse, ignore them with a warning; the "
        "message names what each chosen backend does.",
        "(\\w+) \\1",
        "spell the alternatives out, or validate after generation",
    ),
    LintRule(
        "T001",
        "special-token-literal",
        WARNING,
        "tokenizer",
        "A grammar literal contains the text of a special token of `--tokenizer`.",
        "Backends match literals against ordinary tokens' bytes, so the model must spell `<|im_end|>` "
        "out of pieces while its real special token is masked: generation stalls or produces text the "
        "serving stack will not treat as the token.",
        'root ::= "answer" "<|im_end|>"',
        "use the backend's special-token syntax (llguidance Lark: <|im_end|>) or end on the stop token",
    ),
    LintRule(
        "L001",
        "max-tokens-too-small",
        ERROR,
        "tokenizer",
        "With `--max-tokens N --tokenizer T`: the shortest output the grammar allows needs more than N tokens.",
        "Every generation will be cut before the grammar can end, so every output is invalid. sgcli finds "
        "the shortest sentence from the grammar's structure (the minimal valid instance for a schema), "
        "splits it into the fewest tokens of T (dynamic programming over the vocabulary), and checks "
        "that each backend's matcher accepts those tokens. A longer sentence could in rare cases take "
        "fewer tokens; the message shows the sentence it measured.",
        '--max-tokens 3 with root ::= "a long fixed preamble"',
        "raise --max-tokens or shorten the grammar",
    ),
]

RULES: dict[str, LintRule] = {r.code: r for r in _ALL}

# Rules that judge a JSON Schema's compile: selecting them never makes lint compile a grammar.
SCHEMA_ONLY = frozenset({"W002", "J001", "J002", "J003", "J004", "J005"})


def all_rules() -> list[LintRule]:
    return list(_ALL)
