"""The model part of the Decoder page (``dashboard/views/decoder.py``): :mod:`.about` holds
the model choice in the sidebar (SmolLM2 as shipped, or a GGUF file of the server's own),
the "About this model" card and the one-click check, under the same page rules as a page
(``tests/dashboard/test_house.py``).
"""
