# Gives this process (a forked session, still root) a mount namespace of its own in which /tmp,
# /var/tmp and /dev/shm are empty tmpfs mounts of its own, gone with its last process. The folders of
# `keep` (the session's own, the library R loads packages from) stay reachable at their paths when
# they lie under one of them.
private_tmp <- function(keep) invisible(.Call(rock_private_tmp, as.character(keep)))

# Gives this process (a forked session, still root) a network namespace of its own: loopback only.
# Connections it opened before stay where they were.
no_network <- function() invisible(.Call(rock_no_network))
