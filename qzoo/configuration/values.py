"""The value domains of options: what each accepts, said in the words an error
message uses (an integer in [1, 1_024], one of a, b, ...), and a typed value parsed
from text."""

import math

from qzoo.errors import bad_value, closest


class Int:
    """Integers in [low, high]; `1e6` and `1_000_000` are accepted when exact."""

    metavar = "INT"

    def __init__(self, low, high, describe=None):
        self.low, self.high = low, high
        self.expected = describe or f"an integer in [{low:_}, {high:_}]"

    def parse(self, text):
        try:
            return int(text)
        except ValueError:
            number = float(text)  # ValueError for words, OverflowError never (gives inf)
            if not number.is_integer() or abs(number) >= 2**53:  # inf and nan included
                raise ValueError(text) from None
            return int(number)

    def accepts(self, value):
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and (self.low <= value <= self.high)
        )


class Real:
    """Finite numbers in an interval; `low_open` / `high_open` exclude the ends."""

    metavar = "FLOAT"

    def __init__(self, low=-math.inf, high=math.inf, low_open=False, high_open=False):
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open
        if high == math.inf:
            self.expected = f"a finite number {'>' if low_open else '>='} {low:g}"
        else:
            left, right = "(" if low_open else "[", ")" if high_open else "]"
            self.expected = f"a number in {left}{low:g}, {high:g}{right}"

    def parse(self, text):
        return float(text)

    def accepts(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return math.isfinite(value) and above and below


class Bool:
    metavar = "BOOL"
    expected = "true or false"

    def parse(self, text):
        words = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
        if text.lower() not in words:
            raise ValueError(text)
        return words[text.lower()]

    def accepts(self, value):
        return isinstance(value, bool)


class Choice:
    def __init__(self, *choices):
        self.choices = choices
        self.metavar = "{" + ",".join(choices) + "}"
        self.expected = "one of " + ", ".join(choices)

    def parse(self, text):
        return text

    def accepts(self, value):
        return value in self.choices


class Text:
    metavar = "TEXT"

    def __init__(self, empty_ok=False, describe="a non-empty text"):
        self.empty_ok, self.expected = empty_ok, describe

    def parse(self, text):
        return text

    def accepts(self, value):
        return isinstance(value, str) and "\0" not in value and (self.empty_ok or bool(value))


class Widths:
    """Layer widths as text, comma-separated positive integers ("120,84"), or '' for
    none given; text, so that config.json and checkpoints hold it as given, in one
    spelling (parse writes "120, 084" as "120,84", so a resume compares like with like)."""

    metavar = "W,W,..."

    def __init__(self, high=10_000, most=8):
        self.high, self.most = high, most
        self.expected = f"'' or 1 to {most} comma-separated integers in [1, {high:_}]"

    def parse(self, text):
        if text == "":
            return ""
        return ",".join(str(int(part)) for part in text.split(","))  # ValueError: words

    def accepts(self, value):
        if not isinstance(value, str):
            return False
        parts = value.split(",") if value else []
        return len(parts) <= self.most and all(
            p.isascii() and p.isdigit() and str(int(p)) == p and 1 <= int(p) <= self.high
            for p in parts
        )


def parse(field, value):
    """The value of Config `field` (a dataclasses.Field) given as text or already typed."""
    domain = field.metadata["domain"]
    typed = value
    if isinstance(value, str) and not isinstance(domain, (Choice, Text)):
        try:
            typed = domain.parse(value.strip())
        except ValueError:
            raise bad_value(field.name, value, domain.expected) from None
    if not domain.accepts(typed):
        expected = domain.expected
        if isinstance(domain, Choice) and isinstance(value, str):
            hint = closest(value, domain.choices, n=1)  # --acting paralel
            expected += f" (did you mean {hint[0]}?)" if hint else ""
        raise bad_value(field.name, value, expected)
    return typed
