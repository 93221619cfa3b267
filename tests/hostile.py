"""Hostile values a crafted link may carry, shared by the AppTest and browser tests: each must
be shown back as literal text only, never as a live link, markup or a fetch."""

HOSTILE = {
    "http-url": "http://evil.example/x",
    "https-url": "https://evil.example/x",
    "markdown-link": "[click](http://evil.example/x)",
    "markdown-image": "![logo](https://evil.example/x.png)",
    "img-tag": '<img src="http://evil.example/x.png">',
    "www-name": "www.evil.example",
    "javascript-url": "[x](javascript:alert(1))",
    "email": "mail@evil.example",
    "angle-autolink": "<https://evil.example/x>",
}
HOSTILE_HOST = "evil.example"
