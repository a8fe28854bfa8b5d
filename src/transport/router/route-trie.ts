import type { PathTemplate } from "../protocols/rest/path-template.js";

/** What the trie holds: an HTTP method bound to a path template. */
export interface Binding {
  readonly httpMethod: string;
  readonly template: PathTemplate;
}

/** A path some bindings take, none with the request's method: the methods they have (a 405's Allow), first bound first. */
export class MethodsAllowed {
  constructor(readonly methods: readonly string[]) {}
}

/** Where one more segment of a path leads, and the bindings whose templates end here. */
class Node<B extends Binding> {
  readonly literals = new Map<string, Node<B>>();
  /** `{field}`: any one segment but an empty one. */
  variable: Node<B> | undefined;
  /** `{field=**}`: the rest of the path, one segment or more (always a template's last). */
  rest: Node<B> | undefined;
  /** By HTTP method. */
  readonly ends = new Map<string, B>();
}

/**
 * Bindings in a trie of path segments, built as vanguard-go builds its REST routes: at each segment
 * a literal is tried before a variable, and a variable before `**`, so that the more literal template
 * takes a path. Two bindings of one method whose templates take the same paths are refused when the
 * trie is built (the second could never be reached). A lookup walks the path once and finds the
 * binding of the request's method, or else the methods the path does take.
 */
export class RouteTrie<B extends Binding> {
  private readonly root = new Node<B>();

  constructor(bindings: Iterable<B>) {
    for (const b of bindings) this.add(b);
  }

  /** `parts`: the request's path split at `/`, the empty part before its first `/` left off. */
  find(method: string, parts: readonly string[]): B | MethodsAllowed | undefined {
    return walk(this.root, parts, 0, method);
  }

  private add(binding: B): void {
    let node = this.root;
    for (const s of binding.template.segments) {
      if (s.kind === "literal") {
        let next = node.literals.get(s.text);
        if (!next) node.literals.set(s.text, (next = new Node()));
        node = next;
      } else if (s.rest) node = node.rest ??= new Node();
      else node = node.variable ??= new Node();
    }
    const taken = node.ends.get(binding.httpMethod);
    if (taken) {
      const method = binding.httpMethod;
      throw new Error(
        `${method} ${binding.template.source} takes the same paths as ${method} ${taken.template.source}: one of them could never be reached`,
      );
    }
    node.ends.set(binding.httpMethod, binding);
  }
}

function walk<B extends Binding>(node: Node<B>, parts: readonly string[], i: number, method: string): B | MethodsAllowed | undefined {
  if (i === parts.length) return ending(node, method);
  let allowed: MethodsAllowed | undefined;
  const literal = node.literals.get(parts[i]!);
  if (literal) {
    const found = walk(literal, parts, i + 1, method);
    if (found !== undefined && !(found instanceof MethodsAllowed)) return found;
    allowed = found;
  }
  if (node.variable && parts[i] !== "") {
    const found = walk(node.variable, parts, i + 1, method);
    if (found !== undefined && !(found instanceof MethodsAllowed)) return found;
    allowed = union(allowed, found);
  }
  if (node.rest) {
    const found = ending(node.rest, method);
    if (found !== undefined && !(found instanceof MethodsAllowed)) return found;
    allowed = union(allowed, found);
  }
  return allowed;
}

function ending<B extends Binding>(node: Node<B>, method: string): B | MethodsAllowed | undefined {
  const binding = node.ends.get(method);
  if (binding) return binding;
  return node.ends.size > 0 ? new MethodsAllowed([...node.ends.keys()]) : undefined;
}

function union(a: MethodsAllowed | undefined, b: MethodsAllowed | undefined): MethodsAllowed | undefined {
  if (!a || !b) return a ?? b;
  return new MethodsAllowed([...new Set([...a.methods, ...b.methods])]);
}
