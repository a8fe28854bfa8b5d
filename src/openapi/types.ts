/** The part of OpenAPI 3.1 this server's description uses; every object is plain JSON. */

export type Json = string | number | boolean | null | readonly Json[] | { readonly [key: string]: Json | undefined };

/** A JSON Schema (2020-12, the dialect of OpenAPI 3.1); undefined members are left out of the JSON. */
export type Schema = { readonly [keyword: string]: Json | undefined };

export interface Parameter {
  readonly name: string;
  readonly in: "path" | "query";
  readonly required: boolean;
  readonly description?: string;
  readonly schema: Schema;
  readonly style?: "form";
  readonly explode?: boolean;
}

export interface MediaType {
  readonly schema: Schema;
  readonly example?: Json;
}

export type Content = { readonly [mediaType: string]: MediaType };

export interface Header {
  readonly description: string;
  readonly schema: Schema;
}

export interface Response {
  readonly description: string;
  readonly headers?: { readonly [name: string]: Header };
  readonly content?: Content;
}

export interface Reference {
  readonly $ref: string;
}

export interface RequestBody {
  readonly required: boolean;
  readonly content: Content;
}

/** Alternatives (OR) of scheme → role names, as OpenAPI 3.1 allows for non-OAuth schemes. */
export type SecurityRequirement = { readonly [scheme: string]: readonly string[] };

export interface Operation {
  readonly operationId: string;
  readonly tags: readonly string[];
  readonly summary: string;
  readonly description: string;
  readonly parameters?: readonly Parameter[];
  readonly requestBody?: RequestBody;
  readonly responses: { readonly [status: string]: Response | Reference };
  readonly security: readonly SecurityRequirement[];
}

export type HttpMethod = "get" | "put" | "post" | "delete" | "patch";

export type PathItem = { [method in HttpMethod]?: Operation };

export interface OpenApiDocument {
  readonly openapi: "3.1.0";
  readonly info: { readonly title: string; readonly version: string; readonly description: string };
  readonly tags: readonly { readonly name: string; readonly description: string }[];
  readonly paths: { readonly [path: string]: PathItem };
  readonly components: {
    readonly schemas: { readonly [name: string]: Schema };
    readonly responses: { readonly [name: string]: Response };
    readonly securitySchemes: {
      readonly [name: string]: { readonly type: "http"; readonly scheme: "basic"; readonly description: string };
    };
  };
}
