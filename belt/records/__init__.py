"""Records with one owner each, built on the store.

Ids, chats and messages, runs, interrupts, the Nexus profile, and the registry of what an owner
knows.

Nothing outside this package creates a chat or a message, spells a collection name or makes an
id; the engine, the handlers, the server and the CLI call these modules.
"""
