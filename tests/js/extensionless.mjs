// A module resolve hook for Node: the SDK's published ESM files import their siblings without a
// file extension ('./http/client'), which bundlers accept and Node's own resolver does not.
// Registered with `node --import ./extensionless.mjs`; the SDK's files are not changed.
import { register } from 'node:module';

register('data:text/javascript,' + encodeURIComponent(`
export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (error) {
    const relative = specifier.startsWith('./') || specifier.startsWith('../');
    if (error?.code !== 'ERR_MODULE_NOT_FOUND' || !relative) throw error;
    for (const suffix of ['.js', '/index.js']) {
      try {
        return await next(specifier + suffix, context);
      } catch {}
    }
    throw error;
  }
}
`));
