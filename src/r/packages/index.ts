export {
  PackageManager,
  gitTarget,
  type InstallRequest,
  type InstalledPackage,
  type PackageDescriptionJson,
  type PackageManagerOptions,
  type PackageMatrixJson,
  type PackageSettingsJson,
  type RemovedPackages,
  type UpdatedPackages,
} from "./manager.js";
export type { RunOptions } from "./runner.js";
export {
  DEFAULT_GIT_REF,
  isValidPackageName,
  parseGitName,
  parsePackageNames,
  parseSource,
  validateGitRef,
  validatePackageName,
  type PackageSource,
} from "./validation.js";
