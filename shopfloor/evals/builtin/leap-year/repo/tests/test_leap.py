from dates.leap import days_in_year


def test_an_ordinary_year():
    assert days_in_year(2023) == 365
