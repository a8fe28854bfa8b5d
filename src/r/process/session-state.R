# A session's state saved into one file by the session's own process, as its own uid, and restored
# by the next process of that session (src/r/engine/suspension.ts says when). Sourced into worker.R's
# environment; Node never reads the file.
#
# The file: three R serializations one after the other, so that a reader can refuse a file that is not
# a saved session before it unserializes anything large:
# 1. the header: what wrote it (the format's number, R's major.minor, when);
# 2. the objects: the global environment (hidden objects included: `.Random.seed` holds the RNG's kind
#    and state) and the contents of environments the user attached, in ONE serialization, so objects
#    that share an environment (closures of one factory) share it again after a restore;
# 3. the rest: the search path, the loaded namespaces and where from, `.libPaths()`, `options()`, the
#    environment variables the session set or unset, the working directory, what was not saved.
# It is written beside its place and renamed there: a reader sees the previous whole file or this one.

state_format <- 1L

# Variables the service sets for each process of a session: theirs, never restored.
state_process_env <- c("TMPDIR", "HOME", "PWD", "OLDPWD", "R_SESSION_TMPDIR", "R_LIBS")

# Search path entries that are not the user's to save: R's own.
state_builtin_entries <- c(".GlobalEnv", "Autoloads", "package:base")

r_major_minor <- function() paste(R.version$major, R.version$minor, sep = ".")

# Why a value cannot come back as it was, or NULL: an external pointer comes back NULL, a weak
# reference empty. The serialization's hook sees each one (and every environment, which is fine).
# data.table's self-reference is one the package rebuilds on its own, so it is not named.
state_loss <- function(value, sink) {
  if (typeof(value) == "externalptr") return("an external pointer, NULL after the resume")
  if (inherits(value, "data.table")) attr(value, ".internal.selfref") <- NULL
  found <- FALSE
  serialize(value, sink, refhook = function(x) {
    if (typeof(x) != "environment") found <<- TRUE
    NULL
  })
  if (found) "holds an external pointer or a weak reference, NULL after the resume" else NULL
}

save_state <- function(path, initial_env) {
  g <- globalenv()
  names <- ls(g, all.names = TRUE, sorted = FALSE)
  # A connection is a number of this process's table: in another process it would name another
  # connection (a socket to Node among them). Not saved, and said.
  is_connection <- vapply(names, function(n) inherits(get(n, envir = g, inherits = FALSE), "connection"), NA)
  lost <- if (any(is_connection)) paste0(names[is_connection], " (a connection, not restored)") else character()
  kept <- names[!is_connection]
  entries <- search()
  attached <- list()
  for (i in seq_along(entries)) {
    entry <- entries[i]
    if (!(entry %in% state_builtin_entries) && !startsWith(entry, "package:")) {
      attached[[entry]] <- as.list(as.environment(i), all.names = TRUE)
    }
  }
  env_now <- Sys.getenv()
  env_now <- env_now[!(names(env_now) %in% state_process_env)]
  same <- names(env_now) %in% names(initial_env)
  changed <- !same | env_now != initial_env[names(env_now)]
  changed[is.na(changed)] <- TRUE
  unset <- setdiff(names(initial_env), c(names(env_now), state_process_env))
  namespaces <- loadedNamespaces()
  namespace_paths <- vapply(namespaces, function(ns) tryCatch(getNamespaceInfo(ns, "path"), error = function(e) ""), "")

  temp <- paste0(path, ".tmp")
  con <- file(temp, "wb")
  ok <- FALSE
  on.exit({
    close(con)
    if (!ok) unlink(temp)
  })
  serialize(list(format = state_format, r = r_major_minor(), saved = format(Sys.time(), tz = "UTC", usetz = TRUE)), con)
  unsaved <- FALSE
  serialize(list(globals = mget(kept, envir = g), attached = attached), con, refhook = function(x) {
    if (typeof(x) != "environment") unsaved <<- TRUE
    NULL
  })
  if (unsaved) {
    sink <- file("/dev/null", "wb")
    for (n in kept) {
      why <- state_loss(get(n, envir = g, inherits = FALSE), sink)
      if (!is.null(why)) lost <- c(lost, paste0(n, " (", why, ")"))
    }
    close(sink)
  }
  serialize(list(
    search = entries,
    namespaces = namespace_paths,
    lib_paths = .libPaths(),
    options = options(),
    env_set = as.list(env_now[changed]),
    env_unset = unset,
    wd = getwd(),
    lost = lost
  ), con, refhook = function(x) NULL)
  close(con)
  on.exit()
  # The previous state is renamed aside first, then the new one put in place and the old removed:
  # ext4 (auto_da_alloc) writes a file renamed over another back to disk before the rename returns,
  # 0.65–0.74 s for 1 GiB (BENCH_ONLY=suspend), while renames to free names cost nothing. Between the
  # two renames only the aside copy exists, which a restore then reads.
  old <- paste0(path, ".old")
  if (file.exists(path)) file.rename(path, old)
  if (!file.rename(temp, path)) {
    unlink(temp)
    if (file.exists(old)) file.rename(old, path)
    stop("the saved state could not be put in place")
  }
  unlink(old)
  ok <- TRUE
  list(lost = I(lost))
}

# Restores the state saved in `path` into this new process, and prints what could not come back
# (the console log has it). Cheap state and packages first, then the objects (their namespaces are
# loaded by then), then options over what the packages set. Packages are restored one by one: one that
# is gone is named, the others still come back.
restore_state <- function(path) {
  # A save that stopped between its two renames left the previous state aside.
  if (!file.exists(path) && file.exists(paste0(path, ".old"))) path <- paste0(path, ".old")
  con <- file(path, "rb")
  on.exit(close(con))
  header <- unserialize(con)
  if (!is.list(header) || !identical(header$format, state_format)) stop("the file is not a saved R session of this service")
  objects <- unserialize(con)
  rest <- unserialize(con)
  if (!is.list(objects) || !is.list(rest)) stop("the saved R session is incomplete")
  notes <- character()
  note <- function(...) notes <<- c(notes, paste0(...))
  same_r <- identical(header$r, r_major_minor())
  if (same_r) {
    .libPaths(rest$lib_paths)
    for (ns in setdiff(names(rest$namespaces), loadedNamespaces())) {
      where <- rest$namespaces[[ns]]
      tryCatch(suppressPackageStartupMessages(loadNamespace(ns, lib.loc = unique(c(if (nzchar(where)) dirname(where), .libPaths())))),
        error = function(e) note("namespace ", ns, " not loaded: ", conditionMessage(e)))
    }
  } else note("saved by R ", header$r, ", resumed by R ", r_major_minor(), ": packages not restored")
  saved <- rest$search
  for (entry in setdiff(search(), saved)) {
    if (startsWith(entry, "package:")) tryCatch(detach(entry, character.only = TRUE), error = function(e) NULL)
  }
  for (i in seq_along(saved)) {
    entry <- saved[i]
    if (entry %in% state_builtin_entries || entry %in% search()) next
    if (startsWith(entry, "package:")) {
      if (!same_r) next
      pkg <- substring(entry, 9L)
      tryCatch(suppressPackageStartupMessages(library(pkg, pos = i, character.only = TRUE, warn.conflicts = FALSE)),
        error = function(e) note("package ", pkg, " not attached: ", conditionMessage(e)))
    } else if (!is.null(objects$attached[[entry]])) {
      attach(objects$attached[[entry]], pos = i, name = entry, warn.conflicts = FALSE)
    }
  }
  list2env(objects$globals, envir = globalenv())
  tryCatch(options(rest$options), error = function(e) {
    for (name in names(rest$options)) tryCatch(options(rest$options[name]), error = function(e) note("option ", name, " not restored"))
  })
  if (length(rest$env_set) > 0L) do.call(Sys.setenv, rest$env_set)
  if (length(rest$env_unset) > 0L) Sys.unsetenv(rest$env_unset)
  if (dir.exists(rest$wd)) setwd(rest$wd)
  lost <- c(rest$lost, notes)
  cat("R session resumed from its state of ", header$saved,
    if (length(lost) > 0L) paste0("; not restored: ", paste(lost, collapse = "; ")), "\n", sep = "")
  raw(0L)
}
