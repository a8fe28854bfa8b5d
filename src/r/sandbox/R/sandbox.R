# Gives this process (a forked session, still root) a mount namespace of its own in which /tmp,
# /var/tmp and /dev/shm are empty tmpfs mounts of its own, gone with its last process. The folders of
# `keep` (the session's own, the library R loads packages from) stay reachable at their paths when
# they lie under one of them.
private_tmp <- function(keep) invisible(.Call(rock_private_tmp, as.character(keep)))

# Gives this process (a forked session, still root) a network namespace of its own: loopback only.
# Connections it opened before stay where they were.
no_network <- function() invisible(.Call(rock_no_network))

# Gives this process (a forked session, still root) a root of its own holding only `read_only` and
# `read_write` (at their own paths; symlinks among them kept as symlinks), the files of `files` (named
# by path) written, the usual device nodes, a /proc listing only its uid's processes, and, with
# `private_tmp`, empty /tmp, /var/tmp and /dev/shm of its own. Absent paths are skipped.
minimal_root <- function(read_only, read_write, files, private_tmp) {
  stopifnot(is.character(files), length(files) == 0L || !is.null(names(files)))
  invisible(.Call(rock_minimal_root, as.character(read_only), as.character(read_write), files, isTRUE(private_tmp)))
}

# Gives this process (a forked session, still root) a network namespace of its own with its loopback
# and one link, eth0, to the service's router namespace (`router`: a descriptor from open_namespace(),
# closed here): the pair of addresses from `link` (the router's end; the session's is the next), the
# router's end named `name` there, a default route through it.
router_network <- function(router, link, name) invisible(.Call(rock_router_network, as.integer(router), as.character(link), as.character(name)))

# A descriptor of the network namespace at `path`, for router_network() in this process's forks.
open_namespace <- function(path) .Call(rock_open_namespace, as.character(path))

# Gives this process (a forked session, still root) a mount namespace of its own in which `target`
# shows the file `source`, read-only.
private_file <- function(source, target) invisible(.Call(rock_private_file, as.character(source), as.character(target)))
