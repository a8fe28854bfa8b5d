# The R side of the engine: one R server process that forks a child per session.
#
# Started with the path of gen/r/protocol.R as its argument. Node writes five lines on stdin (loopback port, secret token, 1 when sessions are isolated, the path
# of the administrator's R profile or nothing, the setup library or nothing), the server connects back
# and then answers control frames. The frames are listed in src/r/protocol-table.ts, and their use
# (sockets, markers, interrupts) is described at the top of src/r/protocol.ts.
# Everything lives inside local() so that a session's global environment starts empty.
#
# The server itself runs as the service's user and runs no user code (the administrator's R profile
# is not a user's): its loop only forks. Isolated, a forked child gives itself limits and drops to its
# session's uid/gid (package `unix`) before it connects back, so no user code ever runs with the
# server's rights.
local({
  # The protocol's letters, fields and markers: gen/r/protocol.R, made from src/r/protocol-table.ts by
  # `npm run gen`; its path is this script's one argument.
  sys.source(commandArgs(trailingOnly = TRUE)[1L], envir = environment())
  # A session's state saved and restored (src/r/session-state.R, the script's second argument).
  sys.source(commandArgs(trailingOnly = TRUE)[2L], envir = environment())

  stdin_con <- file("stdin")
  open(stdin_con)
  boot <- readLines(stdin_con, n = 5L)
  close(stdin_con)
  port <- as.integer(boot[1L])
  server_token <- boot[2L]
  isolated <- identical(boot[3L], "1")
  profile <- if (length(boot) >= 4L) boot[4L] else ""
  # r.setupLibrary: what the start installed because R's own libraries lacked it; searched last.
  setup_library <- if (length(boot) >= 5L) boot[5L] else ""
  if (nzchar(setup_library) && dir.exists(setup_library)) .libPaths(c(.libPaths(), setup_library))
  unix_missing <- isolated && !requireNamespace("unix", quietly = TRUE)

  jsonlite_ns <- loadNamespace("jsonlite")
  to_json <- jsonlite::toJSON
  serialize_json <- jsonlite::serializeJSON
  escape_string <- get("deparse_vector", envir = jsonlite_ns)
  mcparallel <- parallel::mcparallel

  # R's default socket timeout (60 s) would end an idle session: wait for a year instead.
  forever <- 31536000L
  nul <- as.raw(0L)
  # `early`: a SIGINT cut the wait for a request short, so it aimed at the request that comes next.
  state <- new.env()
  state$early <- FALSE

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

  # An answer's frame as the parts to write: one for a small payload (see frame_bytes), the header and
  # the payload itself for a large one, which copying behind its header would cost more than a write.
  # JSON text is the one field of a json frame: writeBin() sends a large string straight from R's
  # memory and ends it with the NUL that ends the field. writeChar() would count its characters and copy
  # it into R's heap first, and charToRaw() copy it too: for a 4 MB answer that was 20-50 ms (a copy's
  # allocation can start a full collection), more than sending it.
  big_payload <- 65536L
  value_parts <- function(value) {
    if (is.character(value)) {
      n <- nchar(value, type = "bytes")
      if (n < big_payload) list(c(frame_header(from_session_json, n + 1L), charToRaw(value), nul))
      else list(frame_header(from_session_json, n + 1L), value)
    } else if (length(value) < big_payload) list(frame_bytes(from_session_value, value))
    else list(frame_header(from_session_value, length(value)), value)
  }

  write_part <- function(con, part) writeBin(part, con, useBytes = TRUE)

  write_frame <- function(con, type, payload = raw(0L)) send(con, frame_bytes(type, payload))

  # A marker on the output stream, then its frame on the main socket, under one handler (each costs
  # as much as the rest of a small evaluation): an interrupt sends again what was not sent.
  send_marked <- function(con, out, marker, type, payload) {
    frame <- frame_bytes(type, payload)
    marked <- FALSE
    repeat if (isTRUE(tryCatch({
      if (!marked) {
        writeBin(marker, out)
        marked <- TRUE
      }
      writeBin(frame, con)
      TRUE
    }, interrupt = function(i) FALSE))) break
  }

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

  # Byte-identical to to_json() for the most common shapes (checked by the tests), ~50x cheaper.
  fast_json <- function(x) {
    if (is.null(x)) return("null")
    if (length(x) != 1L || !is.null(attributes(x))) return(NULL)
    switch(typeof(x),
      logical = if (is.na(x)) "null" else if (x) "true" else "false",
      integer = if (is.na(x)) "null" else as.character(x),
      character = if (is.na(x)) "null" else escape_string(enc2utf8(x)),
      double = if (is.finite(x)) sprintf("%.15g", x) else NULL,
      NULL)
  }

  as_json <- function(x) {
    json <- fast_json(x)
    if (is.null(json)) {
      json <- tryCatch(to_json(x, auto_unbox = TRUE, null = "null", na = "null", digits = NA),
                       error = function(e) serialize_json(x))
      if (identical(as.character(json), "{}")) json <- "null"
    }
    enc2utf8(as.character(json))
  }

  top_call <- quote(eval(expr, globalenv()))

  error_text <- function(e) {
    call <- conditionCall(e)
    if (is.null(call) || identical(call, top_call)) paste0("Error: ", conditionMessage(e))
    else paste0("Error in ", deparse(call, nlines = 1L), ": ", conditionMessage(e))
  }

  condition_text <- function(w) {
    call <- conditionCall(w)
    if (is.null(call) || identical(call, top_call)) conditionMessage(w)
    else paste0("In ", deparse(call, nlines = 1L), ": ", conditionMessage(w))
  }

  run_script <- function(text) {
    value <- NULL
    for (expr in parse(text = text, keep.source = FALSE)) value <- eval(expr, globalenv())
    value
  }

  # The answer to a request: its frame's parts, behind the end marker for a live evaluation.
  answer <- function(live, parts) list(marker = if (live) marker_eval, frame = parts)
  failed <- function(live, text) answer(live, list(frame_bytes(from_session_error, text_field(text))))

  # Evaluates `work` and returns its answer; an R error or an interrupt is left to serve(), which
  # answers it.
  #
  # A live evaluation (Execute) has its messages and warnings sent as frames, and a marker on the output
  # stream before each frame and before it starts, so Node can put printed text and events back in
  # order and tell this evaluation's text from what earlier ones printed. Any other evaluation prints its
  # messages and warnings on the output stream, which then holds all it printed, in R's order, for the
  # console log: its answer needs no marker, which saves a write and a wake-up of Node per call.
  #
  # Interrupts and reading requests: R waits for a socket with interrupts enabled even inside
  # suspendInterrupts(), and an interrupt there loses what that read had taken of the request. A request
  # of one socket read (most) is safe: a SIGINT can only land before any of it was read, and is kept in
  # `early` for it. For a larger request (`announce`) R says when it starts evaluating (the start
  # marker) and Node holds the SIGINT back until then.
  evaluate <- function(con, out, work, announce, live) {
    if (announce || live) send(out, marker_start)
    if (state$early) {
      state$early <- FALSE
      return(failed(live, "Error: evaluation interrupted"))
    }
    on_message <- if (live) function(m) {
      send_marked(con, out, marker_sync, from_session_message, text_field(conditionMessage(m)))
      invokeRestart("muffleMessage")
    } else function(m) {
      cat(conditionMessage(m), file = out, sep = "")
      invokeRestart("muffleMessage")
    }
    on_warning <- if (live) function(w) {
      send_marked(con, out, marker_sync, from_session_warning, text_field(condition_text(w)))
      invokeRestart("muffleWarning")
    } else function(w) {
      cat("Warning: ", condition_text(w), "\n", file = out, sep = "")
      invokeRestart("muffleWarning")
    }
    answer(live, value_parts(allowInterrupts(withCallingHandlers(work(), message = on_message, warning = on_warning))))
  }

  # A SIGINT that arrived after the evaluation it aimed at had ended stays pending while interrupts
  # are suspended; Node asks to consume it before the next evaluation so it hits nothing.
  drain_interrupt <- function() {
    state$early <- FALSE
    tryCatch(allowInterrupts(Sys.sleep(0.001)), interrupt = function(i) NULL)
  }

  # A large serialization Node staged in the session's folder as it arrived: unserialized straight
  # from the file (no copy of its bytes in R), which goes once read, whatever happens.
  read_staged <- function(path) {
    con <- file(path, "rb")
    on.exit({
      close(con)
      unlink(path)
    })
    unserialize(con)
  }

  # An evaluation's letter says how its value is answered (and whether it is live): its payload is the
  # script alone, read with no field before it.
  handle <- function(con, out, frame, live) {
    p <- frame$payload
    announce <- length(p) + header_bytes > one_read
    type <- frame$type
    if (type == to_session_eval_json || type == to_session_live_json) {
      evaluate(con, out, function() as_json(run_script(rawToChar(p))), announce, live)
    } else if (type == to_session_eval_rds || type == to_session_live_rds) {
      evaluate(con, out, function() serialize(run_script(rawToChar(p)), NULL), announce, live)
    } else if (type == to_session_assign) {
      fields <- read_fields(p, to_session_assign_fields)
      body <- body_after(p, fields)
      evaluate(con, out, function() {
        source <- fields[["source"]]
        value <- if (source == source_words[["rdata"]]) unserialize(body)
          else if (source == source_words[["file"]]) read_staged(rawToChar(body))
          else run_script(rawToChar(body))
        assign(fields[["symbol"]], value, envir = globalenv())
        raw(0L)
      }, announce, FALSE)
    } else if (type == to_session_save) {
      path <- readBin(p, "character", 1L)
      evaluate(con, out, function() as_json(save_state(path, state$initial_env)), announce, FALSE)
    } else if (type == to_session_restore) {
      path <- readBin(p, "character", 1L)
      evaluate(con, out, function() restore_state(path), announce, FALSE)
    } else if (type == to_session_drain) {
      drain_interrupt()
    } else stop("unknown frame type ", type)
  }

  # Private temporary folders and limits first (a lowered hard limit cannot be raised again by the
  # uid), then the gid while still root, then the uid. The server runs with no supplementary groups (Node drops them when it starts
  # it), so none is kept. Any failure ends the child before it connects: it never serves as root.
  # Without network (no_network), the connections to Node are opened first, as the session's uid (Node
  # checks whose they are) but still able to become root again, then the network namespace is entered:
  # they stay in the host's; the answer is those connections, NULL otherwise.
  confine <- function(uid, gid, memory, processes, private_tmp, no_network, minimal, home) {
    links <- NULL
    ok <- tryCatch({
      # Still root: a mount namespace of its own, showing only what R needs (minimal_view) or the
      # host's files, and empty /tmp, /var/tmp and /dev/shm.
      # The setup library stays reachable too (a checkout under /tmp): R loads package code lazily.
      if (minimal) minimal_view(home, uid, gid, private_tmp)
      else if (private_tmp) rocksandbox::private_tmp(c(home, if (nzchar(setup_library) && dir.exists(setup_library)) setup_library))
      if (memory > 0) unix::rlimit_as(memory, memory)
      if (processes > 0) unix::rlimit_nproc(processes, processes)
      if (no_network) {
        unix::setegid(gid)
        unix::seteuid(uid)
        links <- list(con = connect("r+b"), out = connect("wb"))
        unix::seteuid(0L)
        unix::setegid(0L)
        rocksandbox::no_network()
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

  # r.sessionFilesystem minimal: the session sees R and its libraries, the programs it may run (/usr),
  # the /etc files the C library, R, name resolution and TLS read, and its own folder; its passwd names
  # only root and the session. Nothing else of the host's: other programs' files, the service's data
  # folder, /home, /root.
  etc_kept <- c("R", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "hosts",
    "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf", "ssl/certs", "ssl/openssl.cnf",
    "ca-certificates.conf", "protocols", "services", "mime.types", "alternatives", "fonts",
    "papersize", "os-release")
  minimal_view <- function(home, uid, gid, private_tmp) {
    rocksandbox::minimal_root(
      read_only = c("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", file.path("/etc", etc_kept),
        R.home(), .libPaths()),
      read_write = c(home, if (!private_tmp) c("/tmp", "/var/tmp", "/dev/shm")),
      files = c(
        "/etc/passwd" = sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\nsession:x:%d:%d:R session:%s:/usr/sbin/nologin\n", uid, gid, home),
        "/etc/group" = sprintf("root:x:0:\nsession:x:%d:\n", gid)),
      private_tmp = private_tmp)
  }

  session <- function(token, workdir, tmpdir, links = NULL) {
    setwd(workdir)
    Sys.setenv(TMPDIR = tmpdir, HOME = workdir)
    base <- baseenv()
    unlockBinding("tempdir", base)
    assign("tempdir", function(check = FALSE) tmpdir, envir = base)
    lockBinding("tempdir", base)
    if (exists(".Random.seed", envir = globalenv(), inherits = FALSE)) rm(".Random.seed", envir = globalenv())
    # What a saved state's environment variables are told apart from (session-state.R).
    state$initial_env <- Sys.getenv()
    con <- if (is.null(links)) connect("r+b") else links$con
    out <- if (is.null(links)) connect("wb") else links$out
    # The token came through the R server, so a later fork may find it in the memory it inherits: an
    # isolated session also proves itself with a secret made now, as its uid, in its own folder (0700),
    # which Node reads and removes (src/r/confine/proof.ts).
    proof <- if (isolated) {
      secret <- paste(sprintf("%02x", as.integer(readBin("/dev/urandom", "raw", 32L))), collapse = "")
      cat(secret, file = file.path(dirname(workdir), proof_file))
      secret
    } else ""
    write_frame(con, from_session_main, text_fields(from_session_main_fields, list(token = token, pid = Sys.getpid(), proof = proof)))
    write_frame(out, from_session_output, text_fields(from_session_output_fields, list(token = token, proof = proof)))
    sink(out)
    sink(out, type = "message")
    suspendInterrupts(serve(con, out))
  }

  # A session's loop: send the last answer, wait for the next request, evaluate it. One exiting
  # handler serves all three steps (a handler costs as much as a small evaluation); `step` tells which
  # one an interrupt or an error cut short:
  # - send: R waits for a socket with interrupts enabled even inside suspendInterrupts(), and an
  #   interrupt there comes before anything of that write was sent: what is left is sent again;
  # - read: a SIGINT while waiting for a request (nothing of it read yet; see evaluate()) is for the
  #   request that comes next, or arrived late for the one that ended, which Node then drains (a drain frame);
  # - eval: the evaluation's error, or "interrupted", is its answer.
  # Uncaught, an interrupt would end this non-interactive R.
  serve <- function(con, out) {
    pending <- NULL
    live <- FALSE
    step <- "read"
    repeat {
      go_on <- tryCatch({
        if (!is.null(pending)) {
          step <- "send"
          if (!is.null(pending$marker)) {
            writeBin(pending$marker, out)
            pending$marker <- NULL
          }
          # Part by part: an interrupt comes before anything of a write was sent, so what is left of
          # the frame is exactly its parts not written yet.
          while (length(pending$frame) > 0L) {
            write_part(con, pending$frame[[1L]])
            pending$frame[[1L]] <- NULL
          }
          pending <- NULL
        }
        step <- "read"
        frame <- read_frame(con)
        if (is.null(frame)) FALSE
        else {
          step <- "eval"
          live <- frame$type == to_session_live_json || frame$type == to_session_live_rds
          pending <- handle(con, out, frame, live)
          TRUE
        }
      }, interrupt = function(i) {
        if (step == "read") state$early <- TRUE
        else if (step == "eval") pending <<- failed(live, "Error: evaluation interrupted")
        TRUE
      }, error = function(e) {
        if (step == "eval") pending <<- failed(live, error_text(e))
        step != "send"
      })
      if (!go_on) break
    }
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

  # Before connecting back: Node bounds the start as a whole, but a connection's greeting more tightly.
  profile_error <- if (!unix_missing) run_profile(profile)

  ctl <- connect("r+b")
  refuse <- function(error) write_frame(ctl, from_server_refused, text_fields(from_server_refused_fields, list(token = server_token, error = error)))
  if (unix_missing) {
    refuse(paste(
      "Isolated R sessions need the R package 'unix' (run as root: Rscript -e \"install.packages('unix')\")",
      "in one of the libraries", paste(.libPaths(), collapse = ", ")))
    quit(save = "no", status = 3L)
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
          links <- if (isolated) confine(as.integer(f[["uid"]]), as.integer(f[["gid"]]), as.numeric(f[["memory_bytes"]]), as.numeric(f[["processes"]]), as.logical(f[["private_tmp"]]), f[["network"]] == network_words[["none"]], f[["filesystem"]] == filesystem_words[["minimal"]], dirname(f[["work_dir"]]))
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
