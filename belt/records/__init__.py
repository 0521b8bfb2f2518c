"""Records built on the store: what belt keeps about the things it simulates."""
