import type { RegistrationOutcome } from "../cluster/opal-registration.js";
import type { Logger } from "./logger.js";

/** Every registration attempt's outcome in the service log (docs/operations.md, "With Opal (registration)"). */
export function registrationLog(logger: Logger, opal: string, retrySeconds: number): (outcome: RegistrationOutcome) => void {
  return (o) => {
    switch (o.kind) {
      case "registered":
        return logger.info(o.first ? "registered with Opal" : "registered with Opal again", { opal, status: o.status, ms: o.ms });
      case "refused":
        return logger.warn(
          o.status === 401
            ? "Opal refused the registration (401): a wrong ROCK_OPAL_TOKEN, or Opal's rules refuse this node's public URL (ROCK_SERVER)"
            : `Opal refused the registration (${o.status})`,
          { opal, status: o.status, answer: o.body, ms: o.ms, retryInSeconds: retrySeconds },
        );
      case "unreachable":
        return logger.warn("Opal could not be reached to register", { opal, error: o.error, ms: o.ms, retryInSeconds: retrySeconds });
      case "unregistered":
        return logger.info("unregistered from Opal", { opal, status: o.status });
      case "unregister-failed":
        return logger.warn("could not unregister from Opal", { opal, error: o.error });
    }
  };
}
