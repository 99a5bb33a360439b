import unittest

from pricing import Line, cart_total, format_cents, line_total


class LineTotalTest(unittest.TestCase):
    def test_no_discount_below_the_bulk_quantity(self):
        self.assertEqual(line_total(100, 9), 900)

    def test_bulk_discount_from_ten_items(self):
        self.assertEqual(line_total(100, 10), 900)  # 10 or more: 10% off

    def test_bulk_discount_above_ten_items(self):
        self.assertEqual(line_total(100, 11), 990)

    def test_negative_quantities_are_refused(self):
        with self.assertRaises(ValueError):
            line_total(100, -1)


class CartTest(unittest.TestCase):
    def test_cart_total_adds_the_lines(self):
        self.assertEqual(cart_total([Line("mug", 1250, 2), Line("sticker", 100, 12)]), 2500 + 1080)

    def test_format_cents(self):
        self.assertEqual(format_cents(3400), "$34.00")
        self.assertEqual(format_cents(5), "$0.05")


if __name__ == "__main__":
    unittest.main()
