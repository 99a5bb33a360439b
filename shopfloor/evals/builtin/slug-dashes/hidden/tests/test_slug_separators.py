from slugs.slugify import slugify


def test_runs_of_punctuation_make_one_dash():
    assert slugify("Hello, World!") == "hello-world"
    assert slugify("a  --  b") == "a-b"
