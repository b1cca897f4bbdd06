"""Live pages: change stamps per topic, and the stream that tells open pages to refresh.

The bottom layer: it knows no app. Apps bump topics (``live.stamps.bump``) from their own
signal receivers and services; templates name the topics a page shows
(``{% live_topic %}``); ``static/live.js`` re-fetches the page's live regions when the stream
(or, where EventSource fails, the 304 poll) says a topic changed. See docs/architecture.md,
"Live pages".
"""
