import sys

from svg import Drawing

d = Drawing(
    1060,
    150,
    "Legend of llamay's diagrams",
    "A solid green box is proved by the test it names; a thick orange box is the subject of the "
    "picture; a dashed grey box is optional or not yet written; a grey pill is outside llamay.",
)
d.box(
    20,
    20,
    250,
    78,
    "proved",
    "a proved box",
    ["what it does"],
    ["tests/gguf/test_gguf.py::test_bad_magic"],
)
d.box(
    290,
    20,
    250,
    78,
    "subject",
    "the subject of the picture",
    ["what the picture is about;", "proved too when it names a test"],
)
d.box(
    560,
    20,
    250,
    78,
    "dashed",
    "optional or not yet written",
    ["a choice you may turn on,", "or a part still to write"],
)
d.box(
    830, 20, 210, 78, "outside", "outside llamay", ["a client, a file on disk,", "llama.cpp"], rx=18
)
d.arrow([(20, 125), (120, 125)])
d.text(130, 129, "data or control flows this way", "body")
d.arrow([(400, 125), (500, 125)], cls="arrow-light")
d.text(510, 129, "an alternative path, or a link between panels", "body")
d.save(sys.argv[1])
