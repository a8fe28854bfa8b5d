# A session's loop (its process forked from the R server, confined): serve() sends the last answer,
# waits for the next request and evaluates it; handle() and evaluate() turn a request into its answer,
# with the value encoders (JSON, R serialization). Sourced into worker.R's environment (its third
# argument), whose frames, connections and confinement it uses.

nul <- as.raw(0L)
# `early`: a SIGINT cut the wait for a request short, so it aimed at the request that comes next.
state <- new.env()
state$early <- FALSE

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
  # Node answers a signal request (peer-signals.R) only while the request that asked runs.
  peer$con <- con
  on.exit(peer$con <- NULL)
  answer(live, value_parts(allowInterrupts(withCallingHandlers(work(), message = on_message, warning = on_warning))))
}

# A SIGINT that arrived after the evaluation it aimed at had ended stays pending while interrupts
# are suspended; Node asks to consume it before the next evaluation so it hits nothing.
drain_interrupt <- function() {
  state$early <- FALSE
  tryCatch(allowInterrupts(Sys.sleep(0.001)), interrupt = function(i) NULL)
}

# A value unserialized as Node writes it into a FIFO (src/r/wire/value-feed.ts): the read overlaps the
# transfer and no raw copy of the whole serialization is held. raw = TRUE: no compression sniffing,
# which would read ahead on a pipe. Node removes the FIFO.
#
# The pipe is opened, and its close set up, with interrupts held, and closed with them held: a client
# that leaves makes Node close its end (unserialize() fails) and interrupt R, and that interrupt taken
# in the close cut it short, leaving R's end open for the rest of the session.
read_stream <- function(path) {
  suspendInterrupts({
    con <- file(path, "rb", raw = TRUE)
    on.exit(suspendInterrupts(close(con)))
  })
  unserialize(con)
}

# A large value serialized straight into the session's value pipe (src/r/wire/value-pipe.ts), which Node
# reads as it comes: serialize(x, NULL) would grow a raw copy of it, copy by copy (0.23 s for 80 MB,
# against 0.08 s into a pipe). The pipe is made anew here, as the session's uid in its own folder,
# whatever was left at its name (no process to start, as Node's mkfifo would). R says it starts
# (piping), and its open waits for Node to open the pipe for reading. The answer is then an empty
# value, which Node takes once it read the end of the pipe. Below pipe_bytes (object.size, an
# estimate) the bytes come in the answer, as they do when the pipe cannot be made (its folder full,
# say): the answer does not fail for the way it travels. A vector of numbers or logicals without
# attributes and under 32,768 elements (16 bytes each at most) is told small without object.size(),
# which costs as much as serialize() itself on such a value.
pipe_bytes <- 1048576
small_value <- function(x) {
  if (!is.null(attributes(x)) || length(x) >= 32768L) return(FALSE)
  switch(typeof(x), logical = , integer = , double = , complex = , raw = , "NULL" = TRUE, FALSE)
}
#
# The pipe is made, and opened, written and closed, with interrupts held (evaluate() allows them
# around the whole evaluation). serialize() takes no interrupt: a SIGINT that lands while it writes
# (Node's, once the client left) waits for R's next check, and taken in the on.exit() that closes the
# pipe it cut the close short: R answered with the pipe still open for writing, and Node, which reads
# the pipe to its end, waited until the grace time ended the session. Held, it is taken once the pipe
# is closed (or before it is made). The writes end even when the client left: Node reads the rest
# and drops it.
piped_value <- function(con, value, path) {
  if (small_value(value) || object.size(value) < pipe_bytes) return(serialize(value, NULL))
  if (!suspendInterrupts(make_pipe(path))) return(serialize(value, NULL))
  write_frame(con, from_session_piping)
  suspendInterrupts(serialize_into(value, path))
  raw(0L)
}
make_pipe <- function(path) tryCatch({
  unlink(path, recursive = TRUE)
  close(fifo(path, "w+"))
  TRUE
}, error = function(e) FALSE)
serialize_into <- function(value, path) {
  pipe <- file(path, "wb", raw = TRUE)
  on.exit(close(pipe))
  serialize(value, pipe)
}

# An evaluation's letter says how its value is answered (and whether it is live): its payload is the
# script alone, read with no field before it; a piped one's value pipe is the session's own (state$pipe).
handle <- function(con, out, frame, live) {
  p <- frame$payload
  announce <- length(p) + header_bytes > one_read
  type <- frame$type
  if (type == to_session_eval_json || type == to_session_live_json) {
    evaluate(con, out, function() as_json(run_script(rawToChar(p))), announce, live)
  } else if (type == to_session_eval_rds || type == to_session_live_rds) {
    evaluate(con, out, function() serialize(run_script(rawToChar(p)), NULL), announce, live)
  } else if (type == to_session_eval_piped) {
    evaluate(con, out, function() piped_value(con, run_script(rawToChar(p)), state$pipe), announce, FALSE)
  } else if (type == to_session_assign) {
    fields <- read_fields(p, to_session_assign_fields)
    body <- body_after(p, fields)
    evaluate(con, out, function() {
      source <- fields[["source"]]
      value <- if (source == source_words[["rdata"]]) unserialize(body)
        else if (source == source_words[["stream"]]) read_stream(rawToChar(body))
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

session <- function(token, workdir, tmpdir, links = NULL) {
  setwd(workdir)
  state$pipe <- file.path(dirname(workdir), value_pipe)
  Sys.setenv(TMPDIR = tmpdir, HOME = workdir)
  # The session's own package library, which Node made unless packages.sessionInstalls is none:
  # install.packages() and remotes write .libPaths()[1], and R_LIBS puts it first for the R processes
  # the session starts too (R CMD INSTALL through system()). An administrator's installs go on from
  # there into the service's library (src/r/packages/publish.ts).
  lib <- file.path(dirname(workdir), "library")
  if (dir.exists(lib)) {
    .libPaths(c(lib, .libPaths()))
    Sys.setenv(R_LIBS = paste(c(lib, strsplit(Sys.getenv("R_LIBS"), ":", fixed = TRUE)[[1L]]), collapse = ":"))
  }
  base <- baseenv()
  unlockBinding("tempdir", base)
  assign("tempdir", function(check = FALSE) tmpdir, envir = base)
  lockBinding("tempdir", base)
  if (exists(".Random.seed", envir = globalenv(), inherits = FALSE)) rm(".Random.seed", envir = globalenv())
  con <- if (is.null(links)) connect("r+b") else links$con
  out <- if (is.null(links)) connect("wb") else links$out
  # The token came through the R server, so a later fork may find it in the memory it inherits: an
  # isolated session also proves itself with a secret made now, as its uid, in its own folder (0700),
  # which Node reads and removes (src/r/process/proof.ts).
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
# handler serves all three steps of every request until an interrupt or an error cuts one short (a
# handler costs as much as a small evaluation: set up once per request, it was ~6 of R's ~20 µs of a
# `1+1` outside a socket, test/bench/README.md, issue 40); `step` tells which one was cut short:
# - send: R waits for a socket with interrupts enabled even inside suspendInterrupts(), and an
#   interrupt there comes before anything of that write was sent: what is left is sent again;
# - read: a SIGINT while waiting for a request (nothing of it read yet; see evaluate()) is for the
#   request that comes next, or arrived late for the one that ended, which Node then drains (a drain frame);
# - eval: the evaluation's error, or "interrupted", is its answer.
# Uncaught, an interrupt would end this non-interactive R.
serve <- function(con, out) {
  peer$pid <- Sys.getpid()
  pending <- NULL
  live <- FALSE
  step <- "read"
  repeat {
    go_on <- tryCatch(repeat {
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
      if (is.null(frame)) break
      step <- "eval"
      live <- frame$type == to_session_live_json || frame$type == to_session_live_rds
      pending <- handle(con, out, frame, live)
    }, interrupt = function(i) {
      if (step == "read") state$early <- TRUE
      else if (step == "eval") pending <<- failed(live, "Error: evaluation interrupted")
      TRUE
    }, error = function(e) {
      if (step == "eval") pending <<- failed(live, error_text(e))
      step != "send"
    })
    # The inner loop ends (NULL) only at the end of the socket.
    if (!isTRUE(go_on)) break
  }
}
