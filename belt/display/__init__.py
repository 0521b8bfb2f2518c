"""What people read: text helpers for outside values (``text``), reports and records as
styled lines (``render``) and the terminal itself, the only module that imports rich
(``output``)."""
