from textkit.wrap import wrap


def test_short_text_is_one_line():
    assert wrap("hello world", 20) == ["hello world"]
