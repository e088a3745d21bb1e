complete --keep-order --exclusive --command kubefedctl --arguments "(COMPLETE=fish kubefedctl -- (commandline --current-process --tokenize --cut-at-cursor) (commandline --current-token))"
