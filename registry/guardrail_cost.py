"""The worst-case cost of a guardrail expression, estimated from its structure as Kubernetes
estimates CEL costs for admission policies: every comprehension (`all`, `exists`,
`exists_one`, `map`, `filter`) costs its range's size times its body, so nested comprehensions
multiply. The `cel` package runs inside the web process holding the GIL and has no cost limit
of its own, so this bound is what keeps one expression from stalling the site. Pure Python.
"""

import re
from dataclasses import dataclass
from typing import Any

MACROS = {"all", "exists", "exists_one", "map", "filter"}
_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"
                |'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[uU]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|[<>!+\-*/%?:.,()\[\]{}])
""", re.VERBOSE | re.DOTALL)
_RELATIONS = {"<", "<=", ">", ">=", "==", "!=", "in"}


class CostUnknown(ValueError):
    """The expression's structure could not be read (the estimate then refuses it)."""


@dataclass(frozen=True)
class Estimate:
    """cost: work units in the worst case; size: how many items the value may hold; item:
    how many items each of its items may hold."""

    cost: int
    size: int
    item: int


def _tokens(text: str) -> list[str]:
    out, at = [], 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if not match:
            raise CostUnknown(f"unexpected character at offset {at}")
        at = match.end()
        if match.lastgroup == "space":
            continue
        out.append("'" if match.lastgroup in ("string", "number") else match.group())
    return out


class _Parser:
    """CEL's grammar, reduced to the shape the estimate needs: a tuple tree."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.at = tokens, 0

    def peek(self) -> str:
        return self.tokens[self.at] if self.at < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if not token or (expected is not None and token != expected):
            raise CostUnknown(f"expected {expected or 'more'} at token {self.at}")
        self.at += 1
        return token

    def expr(self) -> tuple:
        condition = self.binary(0)
        if self.peek() == "?":
            self.take()
            yes = self.binary(0)
            self.take(":")
            return ("cond", condition, yes, self.expr())
        return condition

    LEVELS = (("||",), ("&&",), tuple(_RELATIONS), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> tuple:
        if level == len(self.LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self.LEVELS[level]:
            op = self.take()
            left = ("binop", op, left, self.binary(level + 1))
        return left

    def unary(self) -> tuple:
        if self.peek() in ("!", "-"):
            self.take()
            return ("unary", self.unary())
        return self.member()

    def member(self) -> tuple:
        node = self.primary()
        while self.peek() in (".", "["):
            if self.take() == "[":
                node = ("index", node, self.expr())
                self.take("]")
                continue
            name = self.take()
            if self.peek() == "(":
                node = ("call", node, name, self.arguments(")"))
            else:
                node = ("select", node, name)
        return node

    def arguments(self, close: str) -> list[tuple]:
        self.take()
        items: list[tuple] = []
        while self.peek() != close:
            items.append(self.expr())
            if self.peek() == ":":  # a map entry: key and value both count
                self.take()
                items.append(self.expr())
            if self.peek() != close:
                self.take(",")
        self.take(close)
        return items

    def primary(self) -> tuple:
        token = self.peek()
        if token == "(":
            self.take()
            node = self.expr()
            self.take(")")
            return node
        if token == "[":
            return ("list", self.arguments("]"))
        if token == "{":
            return ("map", self.arguments("}"))
        if token == "'":
            self.take()
            return ("literal",)
        if token == ".":  # a name from the root scope
            self.take()
            token = self.peek()
        if token and (token[0].isalpha() or token[0] == "_"):
            self.take()
            if self.peek() == "(":
                return ("call", None, token, self.arguments(")"))
            if self.peek() == "{":  # a message literal: its field values count
                return ("map", self.arguments("}"))
            return ("ident", token)
        raise CostUnknown(f"unexpected {token or 'end'} at token {self.at}")


def parse(expression: str) -> tuple:
    """The expression's tree; CostUnknown when it cannot be read."""
    try:
        parser = _Parser(_tokens(expression))
        tree = parser.expr()
    except RecursionError:
        raise CostUnknown("the expression is nested too deeply") from None
    if parser.peek():
        raise CostUnknown(f"unexpected {parser.peek()} at token {parser.at}")
    return tree


def _estimate(node: tuple, data: int, bound: dict[str, Estimate]) -> Estimate:
    kind = node[0]
    if kind == "literal":
        return Estimate(1, 1, 1)
    if kind == "ident":
        return bound.get(node[1], Estimate(1, data, data))
    if kind in ("list", "map"):
        parts = [_estimate(child, data, bound) for child in node[1]]
        size = len(parts) // 2 if kind == "map" else len(parts)
        return Estimate(1 + sum(p.cost for p in parts), max(size, 1),
                        max([p.size for p in parts], default=1))
    if kind == "select":
        return Estimate(_estimate(node[1], data, bound).cost + 1, data, data)
    if kind == "index":
        operand, key = _estimate(node[1], data, bound), _estimate(node[2], data, bound)
        return Estimate(operand.cost + key.cost + 1, operand.item, data)
    if kind == "unary":
        inner = _estimate(node[1], data, bound)
        return Estimate(inner.cost + 1, 1, 1)
    if kind == "cond":
        parts = [_estimate(child, data, bound) for child in node[1:]]
        return Estimate(sum(p.cost for p in parts) + 1, max(p.size for p in parts),
                        max(p.item for p in parts))
    if kind == "binop":
        op, left, right = node[1], _estimate(node[2], data, bound), _estimate(node[3], data, bound)
        cost = left.cost + right.cost + 1
        if op == "+":  # list concatenation adds sizes (for numbers and strings it is harmless)
            return Estimate(cost, left.size + right.size, max(left.item, right.item))
        if op == "in":  # membership scans the list
            return Estimate(cost + right.size, 1, 1)
        return Estimate(cost, 1, 1)
    _, target, name, args = node
    if target is not None and name in MACROS and len(args) in (2, 3) and args[0][0] == "ident":
        scope = _estimate(target, data, bound)
        inner = {**bound, args[0][1]: Estimate(1, scope.item, data)}
        body = [_estimate(arg, data, inner) for arg in args[1:]]
        cost = scope.cost + scope.size * (sum(b.cost for b in body) + 1)
        if name == "map":
            return Estimate(cost, scope.size, body[-1].size)
        if name == "filter":
            return Estimate(cost, scope.size, scope.item)
        return Estimate(cost, 1, 1)
    parts = [_estimate(arg, data, bound) for arg in args]
    if target is not None:
        parts.append(_estimate(target, data, bound))
    return Estimate(sum(p.cost for p in parts) + 1, data, data)


def estimate_cost(tree: tuple, *, largest_collection: int) -> int:
    """Worst-case work units when every list or map read from the data holds at most
    `largest_collection` items (and lists built in the expression hold what they are built
    from)."""
    return _estimate(tree, max(largest_collection, 1), {}).cost


def largest_collection(value: Any) -> int:
    """The most items any list or map in a JSON-like value holds."""
    largest, pending = 0, [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            largest = max(largest, len(item))
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            largest = max(largest, len(item))
            pending.extend(item)
    return largest
