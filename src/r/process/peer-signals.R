# Signals to the processes of the owner's other sessions. An isolated session sees only its own uid's
# processes (its /proc hides every other) and kill(2) refuses it every other uid's, so ps's handle of
# another session's process, and ps's and tools::pskill's signals to it, fail. But a user may end any
# session of theirs (DELETE), and Armadillo ends a busy one from another session of the same account
# with ps::ps_terminate(ps::ps_handle(pid)). Where ps or pskill fail, the session therefore asks Node
# (the signal frame, during an evaluation), which grants it only for a process of an open session of
# the same owner and signals it itself (src/r/engine/peer-signals.ts); a refusal leaves ps's own error,
# or pskill's FALSE, as they were. Not isolated, sessions signal each other themselves: nothing fails
# and Node is never asked. Sourced into worker.R's environment (its fourth argument), whose frames it
# uses; the R server registers the hooks before it forks, and a session wraps ps or tools when it
# loads them.

peer <- new.env()
# The session's main connection while it evaluates a request (set by evaluate()), and its own pid:
# only then, and only from that process (not from one it forked), is Node asked.
peer$con <- NULL
peer$pid <- 0L

peer_signals <- c(TERM = 15L, KILL = 9L, INT = 2L)

# When the process `pid` started (seconds since the epoch, as ps counts) once Node signalled it
# (`signal` none: only looked at it); NULL when Node refused, or when this process cannot ask. Node
# answers while the evaluation runs: an interrupt that lands while R waits for the answer would leave
# it unread in front of the next request, so it is held until the answer came, then raised again,
# at once, as R raises one (the interrupt condition to its handlers). Raised with a SIGINT to this process
# instead, it stayed pending until R next looked, which could be in the wait for the next answer
# (code that asks in a loop): held there again, it was raised again, for ever.
interrupt_condition <- structure(list(), class = c("interrupt", "condition"))
ask_node <- function(pid, signal, time = NULL) {
  con <- peer$con
  if (is.null(con) || Sys.getpid() != peer$pid) return(NULL)
  frame <- frame_bytes(from_session_signal, text_fields(from_session_signal_fields,
    list(pid = pid, signal = signal_words[[signal]], start_time = if (is.null(time)) "" else sprintf("%.17g", time))))
  interrupted <- FALSE
  held <- function(i) {
    interrupted <<- TRUE
    FALSE
  }
  repeat if (isTRUE(tryCatch({ writeBin(frame, con); TRUE }, interrupt = held))) break
  repeat {
    answer <- tryCatch(read_frame(con), interrupt = held)
    if (!isFALSE(answer)) break
  }
  # The handlers of the code that asked, then serve()'s, which every evaluation runs under, take it.
  if (interrupted) signalCondition(interrupt_condition)
  if (is.null(answer) || answer$type != to_session_signalled) stop("the R session lost its connection to the service")
  started <- readBin(answer$payload, "character", 1L)
  if (nzchar(started)) as.numeric(started)
}

# `name` of namespace `ns` (and of its attached package) becomes `value`.
replace_in <- function(ns, name, value) {
  envs <- list(ns)
  attached <- paste0("package:", getNamespaceName(ns))
  if (attached %in% search()) envs <- c(envs, as.environment(attached))
  for (env in envs) {
    unlockBinding(name, env)
    assign(name, value, envir = env)
    lockBinding(name, env)
  }
}

# An error of the function a wrapper calls, as that function raises it unwrapped: one that names a
# call names the caller's.
as_callers <- function(e, call) {
  if (!is.null(conditionCall(e))) e$call <- call
  e
}

# ps_handle(pid) of a process this session cannot see is made with the start time Node gives; a
# signal ps cannot send to a handle's process is asked of Node. Anything else is ps's as it was.
wrap_ps <- function() {
  ns <- asNamespace("ps")
  handle <- get("ps_handle", ns)
  replace_in(ns, "ps_handle", function(pid = NULL, time = NULL) {
    call <- sys.call()
    tryCatch(handle(pid, time), error = function(e) {
      e <- as_callers(e, call)
      if (!is.null(time) || !is.integer(pid) || length(pid) != 1L || is.na(pid)) stop(e)
      started <- ask_node(pid, "none")
      if (is.null(started)) stop(e)
      handle(pid, .POSIXct(started, tz = "GMT"))
    })
  })
  # `signal`: the name of what `send` sends, or a function of its arguments that gives it (NULL: none Node sends).
  through_node <- function(send, signal) {
    # Taken now: a promise read once the wrapper replaced it would be the wrapper.
    force(send)
    function(p = ps::ps_handle(), ...) {
      call <- sys.call()
      tryCatch(send(p, ...), error = function(e) {
        e <- as_callers(e, call)
        name <- if (is.function(signal)) signal(...) else signal
        if (is.null(name) || !inherits(p, "ps_handle")) stop(e)
        pid <- ps::ps_pid(p)
        if (is.null(ask_node(pid, name, unclass(ps::ps_create_time(p))))) stop(e)
        invisible(NULL)
      })
    }
  }
  replace_in(ns, "ps_terminate", through_node(get("ps_terminate", ns), "TERM"))
  replace_in(ns, "ps_kill", through_node(get("ps_kill", ns), "KILL"))
  replace_in(ns, "ps_interrupt", through_node(get("ps_interrupt", ns), "INT"))
  replace_in(ns, "ps_send_signal", through_node(get("ps_send_signal", ns), function(sig = NULL, ...) {
    name <- names(peer_signals)[match(sig, peer_signals)]
    if (length(name) == 1L && !is.na(name)) name
  }))
}

# tools::pskill(pid, signal): each pid it could not signal is asked of Node.
wrap_tools <- function() {
  ns <- asNamespace("tools")
  kill <- get("pskill", ns)
  replace_in(ns, "pskill", function(pid, signal = tools::SIGTERM) {
    sent <- kill(pid, signal)
    name <- names(peer_signals)[match(suppressWarnings(as.integer(signal)[1L]), peer_signals)]
    if (!is.na(name)) {
      for (i in which(!sent)) {
        target <- suppressWarnings(as.integer(pid[i]))
        if (!is.na(target)) sent[i] <- !is.null(ask_node(target, name))
      }
    }
    invisible(sent)
  })
}

# Run by the R server before it forks: the hooks live on in every session.
wrap_when_loaded <- function() {
  wraps <- list(ps = wrap_ps, tools = wrap_tools)
  for (package in names(wraps)) {
    if (isNamespaceLoaded(package)) wraps[[package]]()
    else setHook(packageEvent(package, "onLoad"), local({ wrap <- wraps[[package]]; function(...) wrap() }))
  }
}
