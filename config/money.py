"""Amounts of money in words: one rule for every page, message and rule text."""

from decimal import Decimal


def money(amount: int | float | Decimal) -> str:
    """$5,000 for whole amounts, $12.50 otherwise (never `640.0`)."""
    value = Decimal(str(amount))
    if value == value.to_integral_value():
        return f"${int(value):,}"
    return f"${value:,.2f}"
