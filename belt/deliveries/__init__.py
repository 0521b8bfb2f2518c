"""One hook delivery sent and explained: ``belt trigger`` (``trigger``), ``belt replay``
(``replay``), a delivery kept as a ``belt test`` scenario (``keep``), and what the platform does
with a decision (``effects``)."""
