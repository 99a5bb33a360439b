from slugs.slugify import slugify


def test_one_word():
    assert slugify("Hello") == "hello"
