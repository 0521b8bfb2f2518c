"""Records with one owner each, built on the store: ids, chats and messages, runs, interrupts.

Nothing outside this package creates a chat or a message, spells a collection name or makes an
id; the engine, the handlers, the server and the CLI call these modules.
"""
