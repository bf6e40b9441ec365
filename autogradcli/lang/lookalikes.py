"""Characters that look like Python's but are not: what a word processor, a PDF or a web
page puts in pasted text (a typographic minus, a multiplication sign, curly quotes), each
with the ASCII character to write instead."""

from __future__ import annotations

# character -> (what it looks like, the character to write)
LOOKALIKES: dict[str, tuple[str, str]] = {
    "\u2212": ("a minus sign", "-"),  # MINUS SIGN
    "\u2013": ("a minus sign", "-"),  # EN DASH
    "\u2014": ("a minus sign", "-"),  # EM DASH
    "\u2010": ("a minus sign", "-"),  # HYPHEN
    "\u00d7": ("a multiplication sign", "*"),
    "\u22c5": ("a multiplication sign", "*"),  # DOT OPERATOR
    "\u00b7": ("a multiplication sign", "*"),  # MIDDLE DOT
    "\u00f7": ("a division sign", "/"),
    "\u2215": ("a division sign", "/"),  # DIVISION SLASH
    "\u201c": ("a quote", '"'),
    "\u201d": ("a quote", '"'),
    "\u2018": ("a quote", "'"),
    "\u2019": ("a quote", "'"),
    "\u00a0": ("a space", " "),  # NO-BREAK SPACE
    "\u2009": ("a space", " "),  # THIN SPACE
    "\uff0c": ("a comma", ","),  # FULLWIDTH COMMA
}


def lookalike(text: str) -> dict[str, str] | None:
    """The first look-alike character in ``text``: the character, its code ``point``, what it
    looks like, what to write, and the text with every look-alike replaced; None if none."""
    for char in text:
        if char in LOOKALIKES:
            name, ascii_char = LOOKALIKES[char]
            fixed = "".join(LOOKALIKES[c][1] if c in LOOKALIKES else c for c in text)
            return {
                "char": char,
                "point": f"U+{ord(char):04X}",
                "looks": name,
                "write": ascii_char,
                "fixed": fixed,
            }
    return None
