import { createRequire } from 'node:module';

type PathToRegexp = (path: unknown, options?: Record<string, unknown>) => { regexp: RegExp; keys: unknown[] };

const MAX_MATCHERS = 1000;

/**
 * express-openapi-validator 5.6 compiles a path-to-regexp matcher for every
 * documented path it scans, on every request, until one matches (upstream
 * cdimascio/express-openapi-validator#1217, "perf: cache route matchers", is
 * open). Compiling costs far more than matching: with this document it was the
 * largest single cost of a GET. A matcher depends only on the route and its
 * options, and path-to-regexp builds its regexps without the `g` flag, so one
 * compiled matcher can serve every request. This memoizes the function the
 * validator calls; it is idempotent and bounded.
 */
export function memoizeValidatorRouteMatchers(): void {
  const load = createRequire(createRequire(import.meta.url).resolve('express-openapi-validator'));
  const module = load('path-to-regexp') as { pathToRegexp: PathToRegexp & { memoized?: true } };
  if (module.pathToRegexp.memoized) return;
  const compile = module.pathToRegexp;
  const matchers = new Map<string, ReturnType<PathToRegexp>>();
  const memoized = ((path: unknown, options: Record<string, unknown> = {}) => {
    // The validator passes `{sensitive, strict}`; anything else is compiled as asked.
    if (typeof path !== 'string' || Object.keys(options).some((k) => k !== 'sensitive' && k !== 'strict')) return compile(path, options);
    const key = `${options.sensitive ? 's' : '-'}${options.strict ? 's' : '-'}${path}`;
    let matcher = matchers.get(key);
    if (!matcher) {
      if (matchers.size >= MAX_MATCHERS) matchers.clear();
      matcher = compile(path, options);
      matchers.set(key, matcher);
    }
    return matcher;
  }) as PathToRegexp & { memoized?: true };
  memoized.memoized = true;
  module.pathToRegexp = memoized;
}
