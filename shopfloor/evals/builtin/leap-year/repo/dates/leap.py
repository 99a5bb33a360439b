"""Calendar rules."""


def is_leap(year):
    """True for a leap year of the Gregorian calendar."""
    return year % 4 == 0


def days_in_year(year):
    return 366 if is_leap(year) else 365
