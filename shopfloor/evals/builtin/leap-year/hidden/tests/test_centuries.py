from dates.leap import is_leap


def test_centuries_are_leap_only_every_400_years():
    assert not is_leap(1900)
    assert is_leap(2000)
    assert is_leap(2024)
