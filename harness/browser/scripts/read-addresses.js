// Firefox, chrome context: the addresses watch-addresses.js recorded, in response order.
return window.__dnsstudyAddresses || [];
