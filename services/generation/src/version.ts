/** The generation service's version as /health reports it (platform-interface.md, Versioning). */
export const VERSION = '2.4.0';
