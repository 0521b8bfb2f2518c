"""Hook declaration files: either dialect's, in JSON or TOML (``declarations``), the file
``belt hooks add|list|remove|export`` edit (``hookfile``), rho's config file (``rhoconfig``) and the
traps a valid file can hold (``doctor``)."""
