"""Prices of shopping carts, in cents."""

from pricing.cart import BULK_DISCOUNT_PERCENT, BULK_MIN_QUANTITY, Line, cart_total, format_cents, line_total

__all__ = ["BULK_DISCOUNT_PERCENT", "BULK_MIN_QUANTITY", "Line", "cart_total", "format_cents", "line_total"]
