"""The sections of the Heads at work page (``dashboard/views/heads.py``), one module each, in
the page's order: :mod:`.census` (the chosen model's head census and one head's map),
:mod:`.copying` (the copy test with heads turned off), :mod:`.why` (why a head looks where it
does: a score split into the parts that made it), :mod:`.attribution` (the one-backward
estimate against true effects), :mod:`.explanation` (saliency, attention and rollout),
:mod:`.mask` (the mask composer's cost), :mod:`.e5` (multilingual e5-small's census and heads
off), :mod:`.qk_map` (one head's queries and keys of many sentences in one map); :mod:`.common`
holds what they share. Each section has its ``*_controls`` (a frozen config) and its draw
function, under the same page rules as a page (``tests/dashboard/test_house.py``).
"""
