"""Line totals with a bulk discount, cart totals, and how amounts are shown on a receipt."""

from __future__ import annotations

from dataclasses import dataclass

BULK_MIN_QUANTITY = 10  # a line of this many items or more gets the bulk discount
BULK_DISCOUNT_PERCENT = 10


@dataclass(frozen=True)
class Line:
    sku: str
    unit_price_cents: int
    quantity: int


def line_total(unit_price_cents: int, quantity: int) -> int:
    """What `quantity` items at `unit_price_cents` cost, in cents, bulk discount included."""
    if unit_price_cents < 0 or quantity < 0:
        raise ValueError("prices and quantities cannot be negative")
    total = unit_price_cents * quantity
    if quantity > BULK_MIN_QUANTITY:
        total -= total * BULK_DISCOUNT_PERCENT // 100
    return total


def cart_total(lines: list[Line]) -> int:
    """The sum of the cart's line totals, in cents."""
    return sum(line_total(line.unit_price_cents, line.quantity) for line in lines)


def format_cents(cents: int) -> str:
    """An amount for the receipt: 3400 -> "$34.00"."""
    return f"${cents // 100}.{cents % 100:02d}"
