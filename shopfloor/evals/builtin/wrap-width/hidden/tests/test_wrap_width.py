from textkit.wrap import wrap


def test_no_line_is_longer_than_the_width():
    assert wrap("aaaa bbbbb", 9) == ["aaaa", "bbbbb"]
    lines = wrap("the quick brown fox jumps over the lazy dog", 8)
    assert all(len(line) <= 8 for line in lines), lines
    assert " ".join(lines) == "the quick brown fox jumps over the lazy dog"
