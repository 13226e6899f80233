"""The fixed GBNF rules JSON grammars are built from: whitespace, literals, numbers, strings,
any value, and the string formats. Each rule lists the rules it uses, so a grammar takes only
what it needs."""

from __future__ import annotations

HEX = "[0-9a-fA-F]"
RULES: dict[str, tuple[str, tuple[str, ...]]] = {
    # name: (body, rules it uses)
    "space": ('| " " | "\\n" [ \\t]{0,20}', ()),
    "boolean": ('("true" | "false") space', ("space",)),
    "null": ('"null" space', ("space",)),
    "integral-part": ("[0] | [1-9] [0-9]{0,15}", ()),
    "decimal-part": ("[0-9]{1,16}", ()),
    "integer": ('"-"? integral-part space', ("integral-part", "space")),
    "number": (
        '"-"? integral-part ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space',
        ("integral-part", "decimal-part", "space"),
    ),
    # One code point: a raw character or an escape (no surrogate halves, so lengths are exact).
    "char": (
        '[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] '
        + HEX
        + "{3} | [dD] [0-7] "
        + HEX
        + "{2}))",
        (),
    ),
    "string": ('"\\"" char* "\\"" space', ("char", "space")),
    "value": (
        "object | array | string | number | boolean | null",
        ("object", "array", "string", "number", "boolean", "null"),
    ),
    "object": (
        '"{" space (string ":" space value ("," space string ":" space value)*)? "}" space',
        ("string", "value", "space"),
    ),
    "array": ('"[" space (value ("," space value)*)? "]" space', ("value", "space")),
    # Formats: February stops at the 28th and years at 1000..9999, so every date exists.
    "date": (
        '[1-9] [0-9]{3} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])'
        ' | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30")'
        ' | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8]))',
        (),
    ),
    "time": (
        '([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})?'
        ' ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])',
        (),
    ),
    "date-time": ('date "T" time', ("date", "time")),
    "uuid": (
        " ".join([HEX + "{8}", '"-"', HEX + "{4}", '"-"', HEX + "{4}", '"-"'])
        + f' {HEX}{{4}} "-" {HEX}{{12}}',
        (),
    ),
    "email": (
        '[a-zA-Z0-9_+-]{1,32} ("." [a-zA-Z0-9_+-]{1,32}){0,3} "@"'
        ' [a-zA-Z0-9-]{1,32} ("." [a-zA-Z0-9-]{1,32}){0,3} "." [a-zA-Z]{2,8}',
        (),
    ),
}
