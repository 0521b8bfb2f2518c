"""Records with one owner each, built on the store: nothing outside this package creates a chat
or a message, spells a collection name or makes an id.
"""
