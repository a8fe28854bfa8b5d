# The R side of the engine: one R server process that forks a child per session.
#
# Node writes four lines on stdin (loopback port, secret token, 1 when sessions are isolated, the path
# of the administrator's R profile or nothing), the server connects back and then answers control
# frames. Every frame is: type (1 ASCII byte) + payload length (uint32, big endian) + payload. The
# protocol (sockets, frames, markers, interrupts) is described at the top of src/r/protocol.ts.
# Everything lives inside local() so that a session's global environment starts empty.
#
# The server itself runs as the service's user and runs no user code (the administrator's R profile
# is not a user's): its loop only forks. Isolated, a forked child gives itself limits and drops to its
# session's uid/gid (package `unix`) before it connects back, so no user code ever runs with the
# server's rights.
local({
  # The protocol's letters and markers, named once: they mirror src/r/protocol.ts (Request, Answer,
  # Greeting, Marker, FormatByte, SourceByte), and test/r/protocol.test.ts fails when they disagree.
  request_eval <- "E"
  request_live <- "L"
  request_assign <- "A"
  request_drain <- "D"
  request_fork <- "F"
  request_ping <- "P"
  request_version <- "Q"
  answer_value <- "V"
  answer_text <- "T"
  answer_error <- "X"
  answer_message <- "M"
  answer_warning <- "W"
  answer_forked <- "F"
  answer_pong <- "P"
  greeting_server <- "S"
  greeting_main <- "C"
  greeting_output <- "O"
  # NUL + a type byte: printed text can hold any other byte (cat("\001") prints byte 1) but never NUL,
  # which R strings cannot contain.
  marker_eval <- as.raw(c(0L, 0L))
  marker_sync <- as.raw(c(0L, 1L))
  marker_start <- as.raw(c(0L, 2L))
  # The first byte of a payload: how a value is answered, and what an assignment assigns (R tests for
  # rds and rdata only, anything else is json or a script).
  format_json <- "j"
  format_rds <- "r"
  source_script <- "x"
  source_rdata <- "r"
  # R reads a socket 4096 bytes at a time: a request frame up to this size is taken in one read, even
  # behind a drain frame (5 bytes). Node uses the same figure (ONE_READ).
  one_read <- 4091L

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
    header <- readBin(con, "raw", 5L)
    if (length(header) < 5L) return(NULL)
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

  # A payload is raw bytes, or UTF-8 text (a JSON value) written as it is, never copied into raw.
  payload_raw <- function(payload) if (is.character(payload)) charToRaw(payload) else payload
  payload_size <- function(payload) if (is.character(payload)) nchar(payload, type = "bytes") else length(payload)

  # A frame is sent whole in one write, so Nagle's algorithm never holds its tail back.
  frame_bytes <- function(type, payload) c(frame_header(type, payload_size(payload)), payload_raw(payload))

  # An answer's frame as the parts to write: one for a small payload (see frame_bytes), the header and
  # the payload itself for a large one, which copying behind its header would cost more than a write.
  # A large text (a JSON value) goes as a T frame: writeBin() sends a string straight from R's memory
  # and ends it with a NUL, which Node drops. writeChar() would count its characters and copy it into
  # R's heap first, and charToRaw() copy it too: for a 4 MB answer that was 20-50 ms (a copy's
  # allocation can start a full collection), more than sending it.
  big_payload <- 65536L
  frame_parts <- function(type, payload) {
    n <- payload_size(payload)
    if (n < big_payload) list(frame_bytes(type, payload))
    else if (is.character(payload)) list(frame_header(answer_text, n + 1L), payload)
    else list(frame_header(type, n), payload)
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

  text_raw <- function(x) charToRaw(enc2utf8(x))

  split_nul <- function(payload) {
    ends <- c(which(payload == nul), length(payload) + 1L)
    starts <- c(1L, head(ends, -1L) + 1L)
    vapply(seq_along(ends), function(i) {
      if (ends[i] > starts[i]) rawToChar(payload[starts[i]:(ends[i] - 1L)]) else ""
    }, "")
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

  encode_value <- function(x, format) if (format == format_rds) serialize(x, NULL) else as_json(x)

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

  # The answer to a request: a RESULT or ERROR frame, behind the end marker for a live evaluation.
  answer <- function(live, type, payload) list(marker = if (live) marker_eval, frame = frame_parts(type, payload))
  failed <- function(live, text) answer(live, answer_error, text_raw(text))

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
      send_marked(con, out, marker_sync, answer_message, text_raw(conditionMessage(m)))
      invokeRestart("muffleMessage")
    } else function(m) {
      cat(conditionMessage(m), file = out, sep = "")
      invokeRestart("muffleMessage")
    }
    on_warning <- if (live) function(w) {
      send_marked(con, out, marker_sync, answer_warning, text_raw(condition_text(w)))
      invokeRestart("muffleWarning")
    } else function(w) {
      cat("Warning: ", condition_text(w), "\n", file = out, sep = "")
      invokeRestart("muffleWarning")
    }
    answer(live, answer_value, allowInterrupts(withCallingHandlers(work(), message = on_message, warning = on_warning)))
  }

  # A SIGINT that arrived after the evaluation it aimed at had ended stays pending while interrupts
  # are suspended; Node asks to consume it before the next evaluation so it hits nothing.
  drain_interrupt <- function() {
    state$early <- FALSE
    tryCatch(allowInterrupts(Sys.sleep(0.001)), interrupt = function(i) NULL)
  }

  handle <- function(con, out, frame) {
    p <- frame$payload
    announce <- length(p) + 5L > one_read
    value_of_script <- function() encode_value(run_script(rawToChar(p[-1L])), rawToChar(p[1L]))
    type <- frame$type
    if (type == request_eval || type == request_live) {
      evaluate(con, out, value_of_script, announce, type == request_live)
    } else if (type == request_assign) {
      kind <- rawToChar(p[1L])
      n <- sum(as.integer(p[2:5]) * c(16777216, 65536, 256, 1))
      symbol <- rawToChar(p[6:(5 + n)])
      body <- if (length(p) > 5 + n) p[(6 + n):length(p)] else raw(0L)
      evaluate(con, out, function() {
        value <- if (kind == source_rdata) unserialize(body) else run_script(rawToChar(body))
        assign(symbol, value, envir = globalenv())
        raw(0L)
      }, announce, FALSE)
    } else if (type == request_drain) {
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
      # Still root: a mount namespace of its own, with only what R needs (minimal_view) or the host's
      # files, and empty /tmp, /var/tmp and /dev/shm.
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

  # r.sessionFilesystem minimal: the session's root holds R and its libraries, the programs it may
  # run (/usr), the /etc files the C library, R, name resolution and TLS read, and its own folder; its
  # passwd names only root and the session. Nothing else of the host's: other programs' files, the
  # service's data folder, /home, /root.
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
    con <- if (is.null(links)) connect("r+b") else links$con
    out <- if (is.null(links)) connect("wb") else links$out
    write_frame(con, greeting_main, text_raw(paste0(token, "\n", Sys.getpid())))
    write_frame(out, greeting_output, text_raw(token))
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
  #   request that comes next, or arrived late for the one that ended, which Node then drains (frame D);
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
          live <- frame$type == request_live
          pending <- handle(con, out, frame)
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
  if (unix_missing) {
    write_frame(ctl, answer_error, text_raw(paste0(server_token, "\n", paste(
      "Isolated R sessions need the R package 'unix' (run as root: Rscript -e \"install.packages('unix')\")",
      "in one of the libraries", paste(.libPaths(), collapse = ", ")))))
    quit(save = "no", status = 3L)
  }
  if (!is.null(profile_error)) {
    cat(profile_error, "\n", sep = "", file = stderr())
    write_frame(ctl, answer_error, text_raw(paste0(server_token, "\n", profile_error)))
    quit(save = "no", status = 4L)
  }
  version <- paste(R.version$major, R.version$minor, sep = ".")
  write_frame(ctl, greeting_server, text_raw(paste0(server_token, "\n", version, "\n", Sys.getpid())))
  cat("R server", version, "ready, pid", Sys.getpid(), "\n")

  repeat {
    frame <- read_frame(ctl)
    if (is.null(frame)) break
    type <- frame$type
    if (type == request_fork) {
      args <- split_nul(frame$payload)
      child <- tryCatch(
        mcparallel({
          close(ctl)
          links <- if (isolated) confine(as.integer(args[4L]), as.integer(args[5L]), as.numeric(args[6L]), as.numeric(args[7L]), identical(args[8L], "1"), identical(args[9L], "none"), identical(args[10L], "minimal"), dirname(args[2L]))
          session(args[1L], args[2L], args[3L], links)
        }, detached = TRUE),
        error = function(e) e)
      if (inherits(child, "error")) write_frame(ctl, answer_error, text_raw(conditionMessage(child)))
      else write_frame(ctl, answer_forked, text_raw(as.character(child$pid)))
    } else if (type == request_ping) {
      write_frame(ctl, answer_pong)
    } else if (type == request_version) {
      wanted <- rawToChar(frame$payload)
      write_frame(ctl, answer_value, tryCatch(encode_value(if (wanted == format_rds) R.version else unclass(R.version), wanted), error = function(e) raw(0L)))
    } else stop("unknown control frame ", type)
  }
})
