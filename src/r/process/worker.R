# The R side of the engine: one R server process that forks a child per session.
#
# Started with four arguments, the R files it reads into its environment first: gen/r/protocol.R,
# src/r/process/session-state.R, src/r/process/session-loop.R (a session's loop: this file is the server's boot,
# confinement and fork loop) and src/r/peer-signals.R. Node writes nine lines on stdin (loopback port,
# secret token, 1 when sessions are isolated, the path of the administrator's R profile or nothing, the
# setup library or nothing, packages.sessionInstalls, packages.repos separated by spaces or nothing, the
# router namespace's path or nothing, the resolv.conf sessions see as a JSON string or nothing), the
# server connects back and then answers control frames. The frames are listed in src/r/wire/protocol-table.ts, and their use
# (sockets, markers, interrupts) is described at the top of src/r/protocol.ts.
# Everything lives inside local() so that a session's global environment starts empty.
#
# The server itself runs as the service's user and runs no user code (the administrator's R profile
# is not a user's): its loop only forks. Isolated, a forked child gives itself limits and drops to its
# session's uid/gid (package `unix`) before it connects back, so no user code ever runs with the
# server's rights.
local({
  # The protocol's letters, fields and markers: gen/r/protocol.R, made from src/r/wire/protocol-table.ts by
  # `npm run gen`; its path is this script's first argument.
  sys.source(commandArgs(trailingOnly = TRUE)[1L], envir = environment())
  # A session's state saved and restored (src/r/process/session-state.R, the script's second argument).
  sys.source(commandArgs(trailingOnly = TRUE)[2L], envir = environment())
  # A session's loop and its answers (src/r/process/session-loop.R, the script's third argument).
  sys.source(commandArgs(trailingOnly = TRUE)[3L], envir = environment())
  # Signals to the owner's other sessions, asked of Node (src/r/process/peer-signals.R, the fourth argument).
  sys.source(commandArgs(trailingOnly = TRUE)[4L], envir = environment())

  stdin_con <- file("stdin")
  open(stdin_con)
  boot <- readLines(stdin_con, n = 9L)
  close(stdin_con)
  port <- as.integer(boot[1L])
  server_token <- boot[2L]
  isolated <- identical(boot[3L], "1")
  profile <- if (length(boot) >= 4L) boot[4L] else ""
  # r.setupLibrary: what the start installed because R's own libraries lacked it; searched last.
  setup_library <- if (length(boot) >= 5L) boot[5L] else ""
  if (nzchar(setup_library) && dir.exists(setup_library)) .libPaths(c(.libPaths(), setup_library))
  unix_missing <- isolated && !requireNamespace("unix", quietly = TRUE)
  # Loaded once here, not by every fork's confinement (a loadNamespace() in each child: its files
  # read, its library opened, 2-10 ms of a fork's ~20; BENCH_ONLY=r, create + delete). Missing, each
  # child says so in the R server's console log when it fails to confine itself.
  if (isolated) requireNamespace("rocksandbox", quietly = TRUE)
  # r.sessionNetwork restricted: the service's router namespace, which every fork links its own
  # network namespace to; held open here for the forks (each closes its copy before it runs code, so
  # that the router goes with the service), and the resolv.conf sessions see, a file of this server's
  # bound over theirs.
  router_path <- if (length(boot) >= 8L) boot[8L] else ""
  restricted <- nzchar(router_path)
  router <- NULL
  resolv_conf <- if (restricted) jsonlite::fromJSON(boot[9L]) else ""
  resolv_file <- file.path(tempdir(), "resolv.conf")

  jsonlite_ns <- loadNamespace("jsonlite")
  to_json <- jsonlite::toJSON
  serialize_json <- jsonlite::serializeJSON
  escape_string <- get("deparse_vector", envir = jsonlite_ns)
  mcparallel <- parallel::mcparallel

  # R's default socket timeout (60 s) would end an idle session: wait for a year instead.
  forever <- 31536000L

  connect <- function(mode) {
    socketConnection("127.0.0.1", port, blocking = TRUE, open = mode, timeout = forever)
  }

  read_frame <- function(con) {
    header <- readBin(con, "raw", header_bytes)
    if (length(header) < header_bytes) return(NULL)
    n <- sum(as.integer(header[2:5]) * c(16777216, 65536, 256, 1))
    list(type = rawToChar(header[1L]), payload = if (n > 0) readBin(con, "raw", n) else raw(0L))
  }

  # R waits for a socket with interrupts enabled even inside suspendInterrupts(), so a SIGINT that
  # lands while R waits to send raises an interrupt before anything was sent: send again.
  send <- function(con, bytes) {
    repeat if (isTRUE(tryCatch({ writeBin(bytes, con); TRUE }, interrupt = function(i) FALSE))) break
  }

  frame_header <- function(type, n) {
    c(charToRaw(type), as.raw(c(n %/% 16777216, (n %/% 65536) %% 256, (n %/% 256) %% 256, n %% 256)))
  }

  # A frame is sent whole in one write, so Nagle's algorithm never holds its tail back.
  frame_bytes <- function(type, payload) c(frame_header(type, length(payload)), payload)

  write_frame <- function(con, type, payload = raw(0L)) send(con, frame_bytes(type, payload))

  # Fields: texts each ended by a NUL, which is how writeBin() writes strings and readBin() reads them;
  # readBin() reads up to each NUL, never into the body that follows. `values` are named, and written in
  # the order of the frame's `names` (a name without a value stops R).
  text_field <- function(x) writeBin(enc2utf8(as.character(x)), raw())
  text_fields <- function(names, values) text_field(vapply(names, function(name) as.character(values[[name]]), ""))
  read_fields <- function(payload, names) {
    fields <- readBin(payload, "character", length(names))
    names(fields) <- names
    fields
  }
  body_after <- function(payload, fields) {
    n <- sum(nchar(fields, type = "bytes")) + length(fields)
    if (length(payload) > n) payload[(n + 1L):length(payload)] else raw(0L)
  }

  # Private temporary folders and limits first (a lowered hard limit cannot be raised again by the
  # uid), then the gid while still root, then the uid. The server runs with no supplementary groups (Node drops them when it starts
  # it), so none is kept. Any failure ends the child before it connects: it never serves as root.
  # With a network namespace of its own (`none`, `restricted`), the connections to Node are opened
  # first, as the session's uid (Node checks whose they are) but still able to become root again, then
  # the namespace is entered: they stay in the host's; the answer is those connections, NULL otherwise.
  # `restricted` links the namespace to the router at the router's end `link`, the link named by the uid
  # there (a later session of the uid replaces it), and shows the sessions' resolv.conf.
  confine <- function(uid, gid, memory, processes, private_tmp, network, link, minimal, home) {
    links <- NULL
    ok <- tryCatch({
      # Still root: a mount namespace of its own, showing only what R needs (minimal_view) or the
      # host's files, and empty /tmp, /var/tmp and /dev/shm.
      # The setup library stays reachable too (a checkout under /tmp): R loads package code lazily.
      if (minimal) minimal_view(home, uid, gid, private_tmp, network == network_words[["restricted"]])
      else {
        if (network == network_words[["restricted"]]) rocksandbox::private_file(resolv_file, "/etc/resolv.conf")
        if (private_tmp) rocksandbox::private_tmp(c(home, if (nzchar(setup_library) && dir.exists(setup_library)) setup_library))
      }
      if (memory > 0) unix::rlimit_as(memory, memory)
      if (processes > 0) unix::rlimit_nproc(processes, processes)
      if (network != network_words[["host"]]) {
        unix::setegid(gid)
        unix::seteuid(uid)
        links <- list(con = connect("r+b"), out = connect("wb"))
        unix::seteuid(0L)
        unix::setegid(0L)
        if (network == network_words[["none"]]) rocksandbox::no_network()
        else rocksandbox::router_network(router, link, paste0("s", uid))
      }
      unix::setgid(gid)
      unix::setuid(uid)
      Sys.umask("077")
      unix::getuid() == uid && unix::geteuid() == uid && unix::getgid() == gid && unix::getegid() == gid
    }, error = function(e) {
      # The R server's console log says why (the session's own output goes nowhere yet).
      cat("R session not confined, so not started: ", conditionMessage(e), "\n", sep = "", file = stderr())
      FALSE
    })
    # mcexit, not quit(): quit() would run R's clean-up of the server's temporary folder.
    if (!isTRUE(ok)) parallel:::mcexit(1L)
    links
  }

  refuse_installs <- function() {
    refused <- function(...) {
      stop("R packages cannot be installed from an R session on this server (packages.sessionInstalls is none): ",
        "an administrator or a manager installs them through the R server's packages (/rserver/packages)", call. = FALSE)
    }
    for (where in list(asNamespace("utils"), as.environment("package:utils"))) {
      unlockBinding("install.packages", where)
      assign("install.packages", refused, envir = where)
      lockBinding("install.packages", where)
    }
  }

  # r.sessionFilesystem minimal: the session sees R and its libraries, the programs it may run (/usr),
  # the /etc files the C library, R, name resolution and TLS read, and its own folder; its passwd names
  # only root and the session. Nothing else of the host's: other programs' files, the service's data
  # folder, /home, /root.
  etc_kept <- c("R", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "hosts",
    "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf", "ssl/certs", "ssl/openssl.cnf",
    "ca-certificates.conf", "protocols", "services", "mime.types", "alternatives", "fonts",
    "papersize", "os-release")
  # A restricted session's resolv.conf is the sessions' own, not the host's.
  minimal_view <- function(home, uid, gid, private_tmp, restricted) {
    rocksandbox::minimal_root(
      read_only = c("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
        file.path("/etc", if (restricted) setdiff(etc_kept, "resolv.conf") else etc_kept), R.home(), .libPaths()),
      read_write = c(home, if (!private_tmp) c("/tmp", "/var/tmp", "/dev/shm")),
      files = c(
        "/etc/passwd" = sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\nsession:x:%d:%d:R session:%s:/usr/sbin/nologin\n", uid, gid, home),
        "/etc/group" = sprintf("root:x:0:\nsession:x:%d:\n", gid),
        if (restricted) c("/etc/resolv.conf" = resolv_conf)),
      private_tmp = private_tmp)
  }

  # R's JIT does not compile closures made inside local(); compiled, the R side of a small evaluation
  # costs about a third less (75 -> 49 us measured outside a session). Paid once, at the R server's
  # start (~150 ms): sessions are forks and inherit the compiled closures.
  for (name in ls()) {
    value <- get(name, inherits = FALSE)
    if (is.function(value)) assign(name, compiler::cmpfun(value))
  }

  # The administrator's R profile (r.profile): trusted code, run once here as the service's user before
  # any session is forked. What it attaches and the options it sets carry into every session; what it
  # assigns stays in an environment of its own, so a session's global environment still starts empty
  # (a profile that means to share an object assigns it in globalenv() itself). Its warnings go to the
  # console log at once: R would only print them when this top-level call ends, which is never.
  # Returns NULL, or the error that must stop the start.
  run_profile <- function(path) {
    if (!nzchar(path)) return(NULL)
    env <- new.env(parent = globalenv())
    top <- quote(eval(expr, env))
    # R's own wording: `Error in f(): …`, or `Error: …` for a stop() at the top of the file.
    described <- function(what, e) {
      call <- conditionCall(e)
      where <- if (is.null(call) || identical(call, top)) "" else paste0(" in ", deparse(call, nlines = 1L))
      paste0(what, where, ": ", conditionMessage(e))
    }
    tryCatch({
      withCallingHandlers(
        for (expr in parse(path, keep.source = FALSE)) eval(expr, env),
        warning = function(w) {
          cat("R profile ", path, ": ", described("Warning", w), "\n", sep = "", file = stderr())
          invokeRestart("muffleWarning")
        })
      NULL
    }, error = function(e) paste0("R profile ", path, " failed: ", described("Error", e)))
  }

  # The repositories a session's install.packages() uses when it names none, as the package API's:
  # packages.repos, else R's own with its "@CRAN@" placeholder made a real mirror, as Rock's profile does
  # (an R with none set refuses non-interactively: "trying to use CRAN without setting a mirror").
  # The administrator's R profile, run next, may set others.
  repos <- strsplit(boot[7L], " ", fixed = TRUE)[[1L]]
  if (length(repos) == 0L || is.na(boot[7L])) {
    repos <- getOption("repos")
    repos[repos == "@CRAN@"] <- "https://cloud.r-project.org"
  }
  options(repos = repos)

  # packages.sessionInstalls none: sessions have no library of their own, and install.packages()
  # (which remotes' installs end in) says why instead of R's "unable to install packages".
  if (identical(boot[6L], "none")) refuse_installs()

  # Before the profile, which may load ps: sessions' signals to their owner's other sessions.
  wrap_when_loaded()
  # Before connecting back: Node bounds the start as a whole, but a connection's greeting more tightly.
  profile_error <- if (!unix_missing) run_profile(profile)
  # What a session's saved environment variables are told apart from (session-state.R): every session
  # starts with the server's, less the variables the service sets for each (TMPDIR, HOME), which are
  # never saved. Read once here: Sys.getenv() in each fork cost 0.3–1 ms (BENCH_ONLY=suspend).
  state$initial_env <- Sys.getenv()

  ctl <- connect("r+b")
  refuse <- function(error) write_frame(ctl, from_server_refused, text_fields(from_server_refused_fields, list(token = server_token, error = error)))
  if (unix_missing) {
    refuse(paste(
      "Isolated R sessions need the R package 'unix' (run as root: Rscript -e \"install.packages('unix')\")",
      "in one of the libraries", paste(.libPaths(), collapse = ", ")))
    quit(save = "no", status = 3L)
  }
  if (restricted) {
    router_error <- tryCatch({
      router <- rocksandbox::open_namespace(router_path)
      writeLines(resolv_conf, resolv_file, sep = "")
      Sys.chmod(resolv_file, "0644")
      NULL
    }, error = function(e) paste("Restricted R sessions cannot join the router:", conditionMessage(e)))
    if (!is.null(router_error)) {
      refuse(router_error)
      quit(save = "no", status = 5L)
    }
  }
  if (!is.null(profile_error)) {
    cat(profile_error, "\n", sep = "", file = stderr())
    refuse(profile_error)
    quit(save = "no", status = 4L)
  }
  version <- paste(R.version$major, R.version$minor, sep = ".")
  write_frame(ctl, from_server_ready, text_fields(from_server_ready_fields, list(token = server_token, version = version, pid = Sys.getpid())))
  cat("R server", version, "ready, pid", Sys.getpid(), "\n")

  repeat {
    frame <- read_frame(ctl)
    if (is.null(frame)) break
    type <- frame$type
    if (type == to_server_fork || type == to_server_fork_as) {
      # An isolated server forks only sessions that confine themselves, and a server that is not cannot
      # confine them.
      as_identity <- type == to_server_fork_as
      f <- read_fields(frame$payload, if (as_identity) to_server_fork_as_fields else to_server_fork_fields)
      child <- if (as_identity != isolated) {
        simpleError(if (isolated) "an isolated R server forks sessions as an identity only" else "an R server that is not isolated cannot fork as an identity")
      } else tryCatch(
        mcparallel({
          close(ctl)
          links <- if (isolated) confine(as.integer(f[["uid"]]), as.integer(f[["gid"]]), as.numeric(f[["memory_bytes"]]), as.numeric(f[["processes"]]), as.logical(f[["private_tmp"]]), f[["network"]], f[["link"]], f[["filesystem"]] == filesystem_words[["minimal"]], dirname(f[["work_dir"]]))
          session(f[["token"]], f[["work_dir"]], f[["tmp_dir"]], links)
        }, detached = TRUE),
        error = function(e) e)
      if (inherits(child, "error")) write_frame(ctl, from_server_fork_failed, text_field(conditionMessage(child)))
      else write_frame(ctl, from_server_forked, text_field(child$pid))
    } else if (type == to_server_ping) {
      write_frame(ctl, from_server_pong)
    } else if (type == to_server_version) {
      format <- readBin(frame$payload, "character", 1L)
      write_frame(ctl, from_server_version, tryCatch(
        if (format == format_words[["rds"]]) serialize(R.version, NULL) else charToRaw(as_json(unclass(R.version))),
        error = function(e) raw(0L)))
    } else stop("unknown control frame ", type)
  }
})
