#compdef belt

_belt_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _BELT_COMPLETE=complete_zsh belt)
}

compdef _belt_completion belt
