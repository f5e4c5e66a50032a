/**
 * A prefix cache of token sequences as SGLang's RadixAttention keeps one: a trie of token ids, bounded
 * in tokens (one node per cached token, as one KV slot per token), evicting the least recently used
 * leaves first. A lookup walks the longest cached prefix of a request and marks it used; an insert adds
 * what the request computed, so a session whose context grows step after step finds all but its new
 * tokens cached. `bench fleet`'s SGLang fake reports `cached_tokens` from it.
 *
 * Eviction removes leaves only (an inner node is a prefix some cached sequence still needs), oldest use
 * first, as SGLang's `evict` does; walking a path touches every node on it, so a parent is never older
 * than its children and a leaf's parent becomes evictable only after the leaf is gone.
 *
 * @example
 * const trie = new TokenTrie({ capacity: 1_000 });
 * trie.insert([1, 2, 3, 4]);
 * trie.match([1, 2, 3, 9]); // 3
 */

interface TrieNode {
  parent: TrieNode | undefined;
  id: number;
  /** Created on the first child: most nodes of a decoded sequence have one child or none. */
  children: Map<number, TrieNode> | undefined;
  lastUsed: number;
}

export interface TokenTrieOptions {
  /** Most tokens the trie holds. */
  capacity: number;
  /**
   * When an insert goes beyond `capacity`, evict down to this many tokens (default: `capacity`). A lower
   * mark evicts in fewer, larger rounds: each round first finds the leaves by walking the whole trie.
   */
  evictTo?: number;
}

export class TokenTrie {
  private readonly root: TrieNode = { parent: undefined, id: -1, children: undefined, lastUsed: 0 };
  private readonly capacity: number;
  private readonly evictTo: number;
  private clock = 0;
  /** Tokens (nodes below the root) held now. */
  size = 0;
  /** Tokens evicted so far. */
  evicted = 0;

  constructor(options: TokenTrieOptions) {
    if (!Number.isInteger(options.capacity) || options.capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${options.capacity}`);
    this.capacity = options.capacity;
    this.evictTo = Math.min(options.evictTo ?? options.capacity, options.capacity);
  }

  /** Length of the longest cached prefix of `ids`; marks that prefix used. */
  match(ids: readonly number[]): number {
    const now = ++this.clock;
    let node = this.root;
    let length = 0;
    for (const id of ids) {
      const child = node.children?.get(id);
      if (!child) break;
      child.lastUsed = now;
      node = child;
      length++;
    }
    return length;
  }

  /** Caches `ids` (what a request read and wrote), then evicts beyond the capacity. */
  insert(ids: readonly number[]): void {
    const now = ++this.clock;
    let node = this.root;
    for (const id of ids) {
      node.children ??= new Map();
      let child = node.children.get(id);
      if (!child) {
        child = { parent: node, id, children: undefined, lastUsed: now };
        node.children.set(id, child);
        this.size++;
      }
      child.lastUsed = now;
      node = child;
    }
    if (this.size > this.capacity) this.evict(this.size - this.evictTo);
  }

  /** Removes `count` tokens, least recently used leaves first. */
  private evict(count: number): void {
    const leaves = new LeafHeap();
    const pending: TrieNode[] = [this.root];
    while (pending.length) {
      const node = pending.pop()!;
      if (node !== this.root && !node.children?.size) leaves.push(node);
      else if (node.children) for (const child of node.children.values()) pending.push(child);
    }
    for (let removed = 0; removed < count && leaves.length; removed++) {
      const leaf = leaves.pop();
      const parent = leaf.parent!;
      parent.children!.delete(leaf.id);
      this.size--;
      this.evicted++;
      if (parent !== this.root && parent.children!.size === 0) leaves.push(parent);
    }
  }
}

/** A binary min-heap of nodes by `lastUsed`. */
class LeafHeap {
  private readonly items: TrieNode[] = [];

  get length(): number {
    return this.items.length;
  }

  push(node: TrieNode): void {
    const items = this.items;
    items.push(node);
    let i = items.length - 1;
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (items[up]!.lastUsed <= node.lastUsed) break;
      items[i] = items[up]!;
      i = up;
    }
    items[i] = node;
  }

  pop(): TrieNode {
    const items = this.items;
    const top = items[0]!;
    const last = items.pop()!;
    if (items.length) {
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        if (left >= items.length) break;
        const right = left + 1;
        const child = right < items.length && items[right]!.lastUsed < items[left]!.lastUsed ? right : left;
        if (items[child]!.lastUsed >= last.lastUsed) break;
        items[i] = items[child]!;
        i = child;
      }
      items[i] = last;
    }
    return top;
  }
}
