"""The parts of the Watch it learn page (``dashboard/views/watch.py``): :mod:`.settings` (the
sidebar and buttons, one frozen config) and :mod:`.figures` (one finished run drawn), under
the same page rules as a page (``tests/dashboard/test_house.py``).
"""
